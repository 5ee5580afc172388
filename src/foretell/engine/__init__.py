"""The embedded engine: model runner, KV slots, scheduler with continuous batching, step loop."""
