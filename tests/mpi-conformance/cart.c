/* A periodic 1-D Cartesian topology: MPI_Cart_shift gives the ring's neighbours, and
   MPI_Cart_coords/MPI_Cart_rank agree. */
#include "conformance.h"

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    MPI_Comm cart;
    int dims[1] = {size_}, periods[1] = {1}, src = -1, dst = -1, coords[1] = {-1}, back = -1;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
    int cr;
    MPI_Comm_rank(cart, &cr);
    MPI_Cart_shift(cart, 0, 1, &src, &dst);
    if (src != (cr + size_ - 1) % size_ || dst != (cr + 1) % size_) fail("shift gives %d and %d", src, dst);
    MPI_Cart_coords(cart, cr, 1, coords);
    MPI_Cart_rank(cart, coords, &back);
    if (coords[0] != cr || back != cr) fail("coords %d, rank back %d", coords[0], back);
    MPI_Comm_free(&cart);
    return verdict("cart");
}
