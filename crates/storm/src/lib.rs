//! STORM's three mechanisms (XFER-AND-SIGNAL, TEST-EVENT, COMPARE-AND-WRITE) over a k-ary tree transport.
