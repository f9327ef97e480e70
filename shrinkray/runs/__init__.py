"""Where work happens and who waits: the run store, the job queues and the sandboxed worker."""
