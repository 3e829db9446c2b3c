//! Shared by `privopt bench mkckks` and the criterion benches.
