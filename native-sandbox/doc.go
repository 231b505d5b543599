// Package sandbox will launch native tools under an OS sandbox derived from
// an agent's attenuated budget: bubblewrap with seccomp and Landlock on
// Linux, Seatbelt on macOS, a Job Object with an AppContainer on Windows,
// and ErrUnsupported elsewhere; argv only, never a shell.
//
// Nothing lives here yet: the tool capability and its sandbox come with
// their own change. Until then agentrt runs no native program for an agent.
package sandbox
