// The redsync peer driver: github.com/go-redsync/redsync/v4 with go-redis v9,
// speaking the line protocol of test/peers/README.md on stdin/stdout, so that
// redislock's TAP tests (test/lib/LockPeer.pm) can run a real Go lock client
// against the same Redis as SQL sessions.  One url= is a single server; several
// are Redlock over those masters (redsync's quorum of n/2+1).
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

type driver struct {
	rs      *redsync.Redsync
	clients []*goredislib.Client

	mu    sync.Mutex
	locks map[string]*redsync.Mutex

	outMu sync.Mutex
	out   *bufio.Writer
}

// errNotHeld: an op on a name this driver holds no lock object for.
var errNotHeld = errors.New("no lock held under this name")

func main() {
	if len(os.Args) < 2 || os.Args[1] != "redsync" {
		fmt.Fprintln(os.Stderr, "usage: redsync-driver redsync url=redis://HOST:PORT [url=...]")
		os.Exit(2)
	}
	d := &driver{locks: map[string]*redsync.Mutex{}, out: bufio.NewWriter(os.Stdout)}
	for _, a := range os.Args[2:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			fatal("bad option %q (want name=value)", a)
		}
		switch k {
		case "url":
			opt, err := goredislib.ParseURL(v)
			if err != nil {
				fatal("url %q: %v", v, err)
			}
			d.clients = append(d.clients, goredislib.NewClient(opt))
		default:
			fatal("unknown option %q", k)
		}
	}
	if len(d.clients) == 0 {
		fatal("no url= given")
	}
	for _, c := range d.clients {
		if err := c.Ping(context.Background()).Err(); err != nil {
			fatal("connect: %v", err)
		}
	}
	d.rs = redsync.New(poolsOf(d.clients)...)
	d.reply("ready", "redsync", moduleVersion("github.com/go-redsync/redsync/v4"))

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64*1024), 1024*1024)
	for in.Scan() {
		w := strings.Fields(in.Text())
		if len(w) == 0 {
			continue
		}
		if len(w) < 2 {
			d.reply(w[0], "err", "no op")
			continue
		}
		if w[1] == "quit" {
			d.reply(w[0], "ok", "bye")
			os.Exit(0)
		}
		go d.serve(w[0], w[1], w[2:])
	}
	os.Exit(0)
}

func poolsOf(cs []*goredislib.Client) []redsyncredis.Pool {
	ps := make([]redsyncredis.Pool, len(cs))
	for i, c := range cs {
		ps[i] = goredis.NewPool(c)
	}
	return ps
}

func fatal(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "redsync-driver: "+f+"\n", a...)
	os.Exit(2)
}

// moduleVersion: the version of a module this binary was built with.
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "unknown"
}

func (d *driver) reply(words ...string) {
	line := strings.Join(words, " ")
	line = strings.ReplaceAll(strings.ReplaceAll(line, "\r", " "), "\n", "; ")
	d.outMu.Lock()
	defer d.outMu.Unlock()
	d.out.WriteString(line + "\n")
	d.out.Flush()
}

func (d *driver) serve(tag, op string, args []string) {
	v, err := d.do(op, args)
	if err != nil {
		d.reply(tag, "err", err.Error())
		return
	}
	d.reply(tag, "ok", v)
}

func ms(s string) (time.Duration, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad milliseconds %q", s)
	}
	return time.Duration(n) * time.Millisecond, nil
}

func need(args []string, n int, usage string) error {
	if len(args) != n {
		return fmt.Errorf("usage: %s", usage)
	}
	return nil
}

func (d *driver) do(op string, args []string) (string, error) {
	switch op {
	case "lock":
		if err := need(args, 3, "lock <name> <lease_ms> <wait_ms>"); err != nil {
			return "", err
		}
		lease, err := ms(args[1])
		if err != nil {
			return "", err
		}
		wait, err := ms(args[2])
		if err != nil {
			return "", err
		}
		m, got, err := d.lock(args[0], lease, wait)
		if err != nil || !got {
			return strconv.FormatBool(got), err
		}
		d.mu.Lock()
		d.locks[args[0]] = m
		d.mu.Unlock()
		return "true", nil
	case "unlock":
		if err := need(args, 1, "unlock <name>"); err != nil {
			return "", err
		}
		m := d.held(args[0])
		if m == nil {
			return "", errNotHeld
		}
		if err := unlock(m); err != nil {
			return "", err
		}
		d.mu.Lock()
		if d.locks[args[0]] == m {
			delete(d.locks, args[0])
		}
		d.mu.Unlock()
		return "true", nil
	case "extend":
		if err := need(args, 2, "extend <name> <lease_ms>"); err != nil {
			return "", err
		}
		lease, err := ms(args[1])
		if err != nil {
			return "", err
		}
		m := d.held(args[0])
		if m == nil {
			return "", errNotHeld
		}
		// redsync extends by the mutex's own expiry: a mutex with the
		// same name and value and the new expiry is the same lock
		m2 := d.rs.NewMutex(args[0], redsync.WithExpiry(lease), redsync.WithValue(m.Value()))
		ok, err := m2.Extend()
		if !ok {
			if err == nil || refused(err) || errors.Is(err, redsync.ErrExtendFailed) {
				return "false", nil
			}
			return "", err
		}
		d.mu.Lock()
		if d.locks[args[0]] == m {
			d.locks[args[0]] = m2
		}
		d.mu.Unlock()
		return "true", nil
	case "key":
		if err := need(args, 1, "key <name>"); err != nil {
			return "", err
		}
		return d.rs.NewMutex(args[0]).Name(), nil
	case "counter":
		if len(args) < 5 || len(args) > 7 {
			return "", errors.New("usage: counter <name> <counter_key> <n> <lease_ms> <wait_ms> [<hold_ms> [<gap_ms>]]")
		}
		n, err := strconv.Atoi(args[2])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad count %q", args[2])
		}
		lease, err := ms(args[3])
		if err != nil {
			return "", err
		}
		wait, err := ms(args[4])
		if err != nil {
			return "", err
		}
		var hold, gap time.Duration
		if len(args) > 5 {
			if hold, err = ms(args[5]); err != nil {
				return "", err
			}
		}
		if len(args) > 6 {
			if gap, err = ms(args[6]); err != nil {
				return "", err
			}
		}
		return d.counter(args[0], args[1], n, lease, wait, hold, gap)
	case "versions":
		return fmt.Sprintf("redsync=%s go-redis=%s go=%s",
			moduleVersion("github.com/go-redsync/redsync/v4"),
			moduleVersion("github.com/redis/go-redis/v9"), runtime.Version()), nil
	}
	return "", fmt.Errorf("unknown op %q", op)
}

func (d *driver) held(name string) *redsync.Mutex {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.locks[name]
}

// refused: the error redsync gives when the key is someone else's on a
// quorum (or after its tries), as opposed to a Redis error.
func refused(err error) bool {
	var taken *redsync.ErrTaken
	var nodeTaken *redsync.ErrNodeTaken
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken)
}

// lock: wait_ms 0 is one attempt (TryLock); otherwise redsync's own retry
// loop (its default random 50-250 ms between tries) bounded by a context
// deadline of wait_ms instead of its default 32 tries.
func (d *driver) lock(name string, lease, wait time.Duration) (*redsync.Mutex, bool, error) {
	var m *redsync.Mutex
	var err error
	if wait == 0 {
		m = d.rs.NewMutex(name, redsync.WithExpiry(lease))
		err = m.TryLock()
	} else {
		m = d.rs.NewMutex(name, redsync.WithExpiry(lease), redsync.WithTries(math.MaxInt32))
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		err = m.LockContext(ctx)
		cancel()
	}
	if err == nil {
		return m, true, nil
	}
	if refused(err) {
		return nil, false, nil
	}
	return nil, false, err
}

func unlock(m *redsync.Mutex) error {
	ok, err := m.Unlock()
	if ok {
		return nil
	}
	if err == nil {
		err = errors.New("redsync: unlock returned false")
	}
	return err
}

// counter: n rounds of lock (retrying when a wait ends), GET, (sleep
// hold), SET v+1, unlock, (sleep gap); the counter lives on the first server.
func (d *driver) counter(name, key string, n int, lease, wait, hold, gap time.Duration) (string, error) {
	ctx := context.Background()
	c := d.clients[0]
	for i := 0; i < n; i++ {
		var m *redsync.Mutex
		for m == nil {
			var err error
			if m, _, err = d.lock(name, lease, wait); err != nil {
				return "", fmt.Errorf("round %d: lock: %w", i, err)
			}
		}
		v, err := c.Get(ctx, key).Int64()
		if err != nil && err != goredislib.Nil {
			return "", fmt.Errorf("round %d: GET: %w", i, err)
		}
		time.Sleep(hold)
		if err := c.Set(ctx, key, v+1, 0).Err(); err != nil {
			return "", fmt.Errorf("round %d: SET: %w", i, err)
		}
		if err := unlock(m); err != nil {
			return "", fmt.Errorf("round %d: unlock: %w", i, err)
		}
		time.Sleep(gap)
	}
	return strconv.Itoa(n), nil
}
