//! SWF traces (read, write, transform) and the Lublin–Feitelson workload model.
