//! The machine manager and node manager: the real-time drivers of cosched-policy and cosched-node.
