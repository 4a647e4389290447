"""The lake: pools (Delta tables through delta-rs), read by Spark."""
