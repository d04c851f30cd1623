//! How ranks exchange bytes.
