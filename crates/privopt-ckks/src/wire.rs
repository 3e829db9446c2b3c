//! Wire format.
