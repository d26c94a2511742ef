//! The process-level discrete-event simulator: drives cosched-node with BSP application models.
