//! HTTP adapter for payments-core: merchant API, operator API, callback dispatcher.
