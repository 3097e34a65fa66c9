//! For tests of cabinet stores and of code over the cabinet (feature `testing`): the reference
//! store in memory and the contract every cabinet store meets.

pub mod contract;
mod memory;

pub use memory::MemoryCabinetStore;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_store_meets_the_contract() {
        futures_executor::block_on(contract::run_cabinet(MemoryCabinetStore::new));
    }

    #[test]
    fn the_upgrade_round_runs_on_the_memory_store() {
        futures_executor::block_on(async {
            let store = MemoryCabinetStore::new();
            for round in 1..=3 {
                let merchant = payments_core::testing::contract::merchant_id(round);
                let project = payments_core::testing::contract::project_id(round);
                contract::every_statement(&store, round, merchant, project).await;
            }
        });
    }
}
