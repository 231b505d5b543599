//go:build !linux && !darwin

package sandbox

// launchUser refuses WithUser where tools do not run as a host user (an
// AppContainer on Windows).
func launchUser(o *options) (User, bool, error) {
	if o.user != nil {
		return User{}, false, refused("drop the user option on this platform", "tools do not run as a host user here (Windows: an AppContainer), so WithUser cannot be applied")
	}
	return User{UID: -1, GID: -1}, false, nil
}

// ToolUser returns the host user tools run as; on this platform there is
// none (-1, -1), and a WithUser option is an error.
func ToolUser(opts ...Option) (User, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	u, _, err := launchUser(&o)
	return u, err
}
