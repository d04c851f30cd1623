//! The tuner.
