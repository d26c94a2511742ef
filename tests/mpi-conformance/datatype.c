/* Derived datatypes: a matrix column as MPI_Type_vector, and a struct {int; double[2]} as
   MPI_Type_create_struct, sent from rank 0 to the last rank. */
#include "conformance.h"
#include <stddef.h>

struct item {
    int id;
    double xy[2];
};

int main(int argc, char **argv) {
    start(&argc, &argv, MPI_THREAD_SINGLE);
    enum { R = 6, C = 5 };
    int m[R][C], col[R];
    MPI_Datatype column, item_t;
    MPI_Type_vector(R, 1, C, MPI_INT, &column);
    MPI_Type_commit(&column);
    int lens[2] = {1, 2};
    MPI_Aint offs[2] = {offsetof(struct item, id), offsetof(struct item, xy)};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
    MPI_Type_create_struct(2, lens, offs, types, &item_t);
    MPI_Type_commit(&item_t);
    int last = size_ - 1;
    struct item items[3];
    if (rank_ == 0) {
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++) m[i][j] = 10 * i + j;
        for (int k = 0; k < 3; k++) items[k] = (struct item){k, {k + 0.5, -k - 0.25}};
        MPI_Send(&m[0][3], 1, column, last, 1, MPI_COMM_WORLD);
        MPI_Send(items, 3, item_t, last, 2, MPI_COMM_WORLD);
    }
    if (rank_ == last) {
        MPI_Status st;
        int count = -1;
        MPI_Recv(col, R, MPI_INT, 0, 1, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_INT, &count);
        if (count != R) fail("column of %d ints", count);
        for (int i = 0; i < R; i++)
            if (col[i] != 10 * i + 3) fail("column[%d] = %d", i, col[i]);
        memset(items, 0, sizeof items);
        MPI_Recv(items, 3, item_t, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int k = 0; k < 3; k++)
            if (items[k].id != k || items[k].xy[0] != k + 0.5 || items[k].xy[1] != -k - 0.25)
                fail("item %d: %d %g %g", k, items[k].id, items[k].xy[0], items[k].xy[1]);
    }
    MPI_Type_free(&column);
    MPI_Type_free(&item_t);
    return verdict("datatype");
}
