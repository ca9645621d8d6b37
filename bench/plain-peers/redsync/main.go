// redsync's own lock/unlock rate, for bench/plain.pl: THREADS goroutines
// share one go-redis client, each looping Mutex.Lock() + Unlock() of a
// redsync mutex on a lock name of its own (WithExpiry(LEASE), WithTries(1):
// one SET NX PX, then the compare-and-DEL script) for SECONDS after a 1 s
// warm-up; every Lock must succeed.  The same pins as test/peers/redsync.
//
// Usage: redsync-pairs URL SECONDS THREADS PREFIX LEASE_MS
// Prints: client=redsync version=V threads=N pairs=P seconds=S rate=R
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/go-redsync/redsync/v4" {
				return m.Version
			}
		}
	}
	return "unknown"
}

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: redsync-pairs URL SECONDS THREADS PREFIX LEASE_MS")
		os.Exit(2)
	}
	opt, err := goredislib.ParseURL(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	secs, _ := strconv.ParseFloat(os.Args[2], 64)
	threads, _ := strconv.Atoi(os.Args[3])
	lease, _ := strconv.Atoi(os.Args[5])
	opt.PoolSize = threads + 2
	rs := redsync.New(goredis.NewPool(goredislib.NewClient(opt)))

	var measure, stop atomic.Bool
	var failed atomic.Value
	counts := make([]int64, threads)
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m := rs.NewMutex(fmt.Sprintf("%s%d", os.Args[4], i),
				redsync.WithExpiry(time.Duration(lease)*time.Millisecond), redsync.WithTries(1))
			for !stop.Load() {
				if err := m.Lock(); err != nil {
					failed.Store(fmt.Sprintf("lock: %v", err))
					return
				}
				if ok, err := m.Unlock(); !ok || err != nil {
					failed.Store(fmt.Sprintf("unlock: %v %v", ok, err))
					return
				}
				if measure.Load() {
					counts[i]++
				}
			}
		}(i)
	}
	time.Sleep(time.Second)
	measure.Store(true)
	t0 := time.Now()
	time.Sleep(time.Duration(secs * float64(time.Second)))
	stop.Store(true)
	elapsed := time.Since(t0).Seconds()
	wg.Wait()
	if f := failed.Load(); f != nil {
		fmt.Fprintln(os.Stderr, "redsync-pairs:", f)
		os.Exit(1)
	}
	var pairs int64
	for _, c := range counts {
		pairs += c
	}
	fmt.Printf("client=redsync version=%s threads=%d pairs=%d seconds=%.3f rate=%.1f\n",
		version(), threads, pairs, elapsed, float64(pairs)/elapsed)
}
