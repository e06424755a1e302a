// Package runner executes one attempt of a batch task instance: a shell
// command, a SQL script against a configured connection, or nothing (noop).
//
// # Contract
//
// Run blocks until the attempt has ended and everything it started has
// ended too: for a shell task, every process of its process group (the
// script's background jobs included) has exited; for a SQL task, the
// transaction has been committed or rolled back and the connection closed.
// Run leaves no goroutines or file descriptors behind.
//
// Cancelling Run's context, or reaching Spec.Timeout, stops the attempt:
// a shell task's process group gets SIGTERM, then SIGKILL after GracePeriod;
// a SQL task's query gets a cancel request and its transaction is rolled
// back. The Result then carries ErrCancelled or ErrTimeout.
//
// # Crash safety
//
// If the daemon dies while a task runs, nothing here is left to clean up in
// this process, but the attempt may live on:
//
//   - A shell script's leader gets SIGKILL from the kernel (parent-death
//     signal), but its children survive in the process group. The daemon
//     records the Proc that Run reports through its started callback before
//     the script can do anything that matters, and on restart calls
//     EndProcessGroup with it. On a cluster node (WatchTasks) the group's
//     leader is a watchdog instead, which ends the whole group when the
//     daemon dies or stays silent (watchdog.go): another node may run the
//     attempt again, and it could not end processes on this host.
//   - A SQL script's session is never committed (COMMIT is sent only after
//     the script has finished), but the server may keep running it until it
//     next talks to the client. Every session carries Spec.Tag as its
//     PostgreSQL application_name, and on restart the daemon calls CancelSQL
//     with it. A SQLite transaction dies with the process.
package runner
