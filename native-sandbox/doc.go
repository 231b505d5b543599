// Package sandbox launches a native program under an OS sandbox described by
// a platform-neutral [Spec]: bubblewrap with a seccomp filter and Landlock on
// Linux, a generated Seatbelt profile on macOS, a Job Object with an
// AppContainer on Windows, and [ErrUnsupported] anywhere else.
//
// What it is for: running the native tools an agent was granted (git, grep,
// a compiler) so that they see only the paths, environment and limits the
// Spec names, and nothing else of the host.
//
// What it must never do:
//
//  1. Run anything unsandboxed. When the backend is missing or degraded
//     (no bwrap, no user namespaces, no seccomp, Landlock demanded but
//     absent), [Launch] refuses with an error naming what is missing.
//  2. Use a shell. argv goes to execve as it is; the executable is an
//     absolute path or is resolved against the Spec's own PATH list.
//  3. Pass the host's environment. The tool gets exactly Spec.Env.
//  4. Write outside Spec.ReadWrite, or into a protected sub-path of it.
//  5. Leave a process behind. When Launch returns, every process the tool
//     started is gone, whether it exited, timed out or was cancelled.
//  6. Run the tool as root. Launched by root, the tool runs as an
//     unprivileged user (DefaultUser, or WithUser), switched to before the
//     user namespace is made, so the kernel's permission checks hold.
//  7. Leave a limit unenforced. A limit the platform cannot enforce
//     refuses the launch; the ones the tool ran into are in Result.
//
// On Linux the chain is: bwrap (namespaces, mounts, seccomp, no
// capabilities) runs a helper, the calling binary re-executed, which
// applies Landlock and rlimits on its own thread and then execs the tool
// with the environment it read from a descriptor. Launched by root, a
// stage 0 comes first: the same binary, as root in a private mount
// namespace, binds the spec's paths where the tool's user can reach them,
// drops to that user and becomes bwrap.
// A binary that calls Launch must therefore call [HelperMain] first thing
// (in main, in an init function or in TestMain).
package sandbox
