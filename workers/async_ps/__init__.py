"""The staleness-aware asynchronous PS: its core, job file, messages and processes."""
