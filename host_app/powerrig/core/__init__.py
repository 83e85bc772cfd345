"""The ground every layer stands on: shared names, errors, the timeline, the clock model, interval
blocks, rail scaling, exact sums, logging. Nothing here imports any other part of powerrig."""
