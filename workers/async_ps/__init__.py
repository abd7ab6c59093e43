"""The staleness-aware asynchronous PS: its core, messages and processes."""
