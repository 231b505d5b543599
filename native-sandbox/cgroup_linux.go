package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// launchCgroups are the cgroups made for one launch: a pids cgroup that
// caps the processes and threads of the sandbox and counts the forks it
// refused, and a memory cgroup that caps everything the sandbox holds in
// memory (anonymous memory, page cache, and the tmpfs, shm and memfd pages
// RLIMIT_AS never sees, which the kernel charges to the cgroup of the
// process that touched them). On cgroup v1 each is a directory of its own
// hierarchy; on v2 one directory holds both.
type launchCgroups struct {
	dirs []string // every directory made, removed at the end
	pids string   // the directory holding pids.max, or ""
	mem  string   // the directory holding the memory limit, or ""
	v2   bool     // mem is a cgroup v2 directory (memory.max)
}

// cgroupPlace is where this process may make a child cgroup for one
// controller.
type cgroupPlace struct {
	dir string
	v2  bool
}

// cgroupParent returns the directory under which this process may create a
// cgroup with the controller: its own cgroup of that v1 hierarchy, or its
// own v2 cgroup when the unified hierarchy delegates the controller to it
// (listed in its cgroup.subtree_control).
func cgroupParent(controller string) (cgroupPlace, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return cgroupPlace{}, err
	}
	defer f.Close()
	var v1, v2 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" && parts[0] == "0" {
			v2 = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				v1 = parts[2]
			}
		}
	}
	// A place counts only if this process may create a cgroup in it.
	writable := func(dir string) bool { return unix.Access(dir, unix.W_OK) == nil }
	if v1 != "" {
		dir := filepath.Join("/sys/fs/cgroup", controller, v1)
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil && writable(dir) {
			return cgroupPlace{dir: dir}, nil
		}
	}
	if v2 != "" {
		// The unified hierarchy is /sys/fs/cgroup on a v2 system and
		// /sys/fs/cgroup/unified on a hybrid one.
		for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
			dir := filepath.Join(root, v2)
			b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
			if err == nil && strings.Contains(" "+strings.TrimSpace(string(b))+" ", " "+controller+" ") && writable(dir) {
				return cgroupPlace{dir: dir, v2: true}, nil
			}
		}
	}
	return cgroupPlace{}, fmt.Errorf("no %s cgroup is available to this process (it may write neither its own cgroup v1 %s hierarchy nor a cgroup v2 subtree that delegates it)", controller, controller)
}

// newLaunchCgroups makes the cgroups a launch needs: pids when pidsMax > 0
// (best effort: the caller falls back to RLIMIT_NPROC, and pidsErr says
// why there is none), memory when memMax > 0 (required: an error means the
// limit cannot be enforced).
func newLaunchCgroups(pidsMax int, memMax int64) (cg *launchCgroups, pidsErr, memErr error) {
	cg = &launchCgroups{}
	made := map[string]string{} // parent -> child, so v2 makes one directory
	mkdir := func(parent string) (string, error) {
		if d, ok := made[parent]; ok {
			return d, nil
		}
		d, err := os.MkdirTemp(parent, "agentrt-sandbox-")
		if err != nil {
			return "", err
		}
		made[parent] = d
		cg.dirs = append(cg.dirs, d)
		return d, nil
	}
	if pidsMax > 0 {
		pidsErr = func() error {
			place, err := cgroupParent("pids")
			if err != nil {
				return err
			}
			dir, err := mkdir(place.dir)
			if err != nil {
				return fmt.Errorf("creating a pids cgroup: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(pidsMax)), 0); err != nil {
				return fmt.Errorf("setting pids.max: %w", err)
			}
			cg.pids = dir
			return nil
		}()
	}
	if memMax > 0 {
		memErr = func() error {
			place, err := cgroupParent("memory")
			if err != nil {
				return err
			}
			dir, err := mkdir(place.dir)
			if err != nil {
				return fmt.Errorf("creating a memory cgroup: %w", err)
			}
			limit := []byte(strconv.FormatInt(memMax, 10))
			if place.v2 {
				if err := os.WriteFile(filepath.Join(dir, "memory.max"), limit, 0); err != nil {
					return fmt.Errorf("setting memory.max: %w", err)
				}
				// No swap beyond the limit; an out-of-memory kill takes the
				// whole sandbox, not one process of it.
				writeIfExists(filepath.Join(dir, "memory.swap.max"), "0")
				writeIfExists(filepath.Join(dir, "memory.oom.group"), "1")
			} else {
				if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), limit, 0); err != nil {
					return fmt.Errorf("setting memory.limit_in_bytes: %w", err)
				}
				// Memory plus swap at the same value: no swap beyond the
				// limit. Without swap accounting, keep the group out of
				// swap as far as the kernel allows.
				if !writeIfExists(filepath.Join(dir, "memory.memsw.limit_in_bytes"), string(limit)) {
					writeIfExists(filepath.Join(dir, "memory.swappiness"), "0")
				}
			}
			cg.mem, cg.v2 = dir, place.v2
			return nil
		}()
	}
	return cg, pidsErr, memErr
}

// writeIfExists writes v to the control file p when it exists, reporting
// whether it was written.
func writeIfExists(p, v string) bool {
	if _, err := os.Stat(p); err != nil {
		return false
	}
	return os.WriteFile(p, []byte(v), 0) == nil
}

// add moves processes into every cgroup of the launch.
func (c *launchCgroups) add(pids ...int) error {
	for _, dir := range c.dirs {
		for _, pid := range pids {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// pidsHitMax reports whether a fork was refused because of pids.max.
func (c *launchCgroups) pidsHitMax() bool {
	if c.pids == "" {
		return false
	}
	return eventCount(filepath.Join(c.pids, "pids.events"), "max") > 0
}

// oomKilled reports whether the memory cgroup killed a process at its
// limit.
func (c *launchCgroups) oomKilled() bool {
	switch {
	case c.mem == "":
		return false
	case c.v2:
		return eventCount(filepath.Join(c.mem, "memory.events"), "oom_kill") > 0
	}
	return eventCount(filepath.Join(c.mem, "memory.oom_control"), "oom_kill") > 0
}

// eventCount reads the counter named key from a "key value" control file.
func eventCount(file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove deletes the cgroups; by then their processes are gone, though the
// kernel may take a moment to notice the last one's exit.
func (c *launchCgroups) remove() {
	for _, dir := range c.dirs {
		for i := 0; i < 50; i++ {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
