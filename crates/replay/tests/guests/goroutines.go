// Issue #11: goroutines on several threads computing without system calls, long enough for forced
// sync points inside their loops (and for the runtime's SIGURG preemption), then a combined result.
package main

import (
	"fmt"
	"runtime"
	"sync"
)

func work(id int) uint64 {
	h := uint64(id) + 1469598103934665603
	for i := 0; i < 8000000; i++ {
		h ^= uint64(i)
		h *= 1099511628211
	}
	return h
}

func main() {
	runtime.GOMAXPROCS(4)
	var wg sync.WaitGroup
	res := make([]uint64, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); res[i] = work(i) }(i)
	}
	wg.Wait()
	var x uint64
	for _, r := range res {
		x ^= r
	}
	fmt.Println("goroutines", len(res), x)
}
