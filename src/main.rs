//! The `gradlift` command line. (Stub: being written.)

fn main() {}
