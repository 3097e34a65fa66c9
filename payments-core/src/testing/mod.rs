//! Test support for embedders (feature `testing`): an in-memory store, a manual clock, a seeded
//! random source, payment fixtures, proptest strategies and the store contract suite every
//! adapter runs.

pub mod caller;
pub mod clock;
pub mod contract;
pub mod fixtures;
pub mod matching;
pub mod memory;
pub mod strategies;

pub use caller::TestCaller;
pub use clock::{ManualClock, SeededRandom};
pub use fixtures::sealing_keys;
pub use matching::{AfterCursor, Matches, Unlimited};
pub use memory::MemoryStore;
