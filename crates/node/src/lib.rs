//! Node-level coscheduling logic (GS, SB, IB, DCS, PB, PROC, FCS) as pure state machines.
