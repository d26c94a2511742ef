//! Unit tests of the node manager core, with a virtual clock and the test as the shell and the machine manager.
