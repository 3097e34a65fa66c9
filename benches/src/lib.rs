//! Shared helpers for benchmarks and the load generator.
