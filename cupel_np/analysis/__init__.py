"""What the matrices mean: selection reports, policy sensitivity and sweeps, budget simulation,
and the Pipeline that runs one policy over one item set."""
