//go:build linux || darwin

package sandbox

import "os"

// launchUser returns the host identity the tool runs as, and whether the
// launcher must switch to it (it runs as root).
func launchUser(o *options) (u User, drop bool, err error) {
	if os.Geteuid() != 0 {
		own := User{UID: os.Getuid(), GID: os.Getgid()}
		if o.user != nil && *o.user != own {
			return User{}, false, refused("drop the user option, or run agentrt as root to run tools as another user",
				"tools run as this process's own user (uid %d, gid %d), which is not root and cannot switch to uid %d, gid %d", own.UID, own.GID, o.user.UID, o.user.GID)
		}
		return own, false, nil
	}
	u = DefaultUser
	if o.user != nil {
		u = *o.user
	}
	switch {
	case u.UID == 0 || u.GID == 0:
		return User{}, false, refused("choose an unprivileged user and group, such as nobody (65534:65534)",
			"uid %d, gid %d would give the tool root's file access", u.UID, u.GID)
	case u.UID < 0 || u.GID < 0 || u.UID > 1<<32-2 || u.GID > 1<<32-2:
		return User{}, false, refused("", "uid %d, gid %d is not a valid user and group", u.UID, u.GID)
	}
	return u, true, nil
}

// ToolUser returns the host user and group a Launch with opts runs the tool
// as: the WithUser identity (DefaultUser by default) when this process is
// root, else this process's own. A caller that prepares files for the tool
// (a workspace) gives them to this user.
func ToolUser(opts ...Option) (User, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	u, _, err := launchUser(&o)
	return u, err
}
