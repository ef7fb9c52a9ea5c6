package main

import "syscall"

// schedPolicy names the process's scheduling policy (sched(7)): "other"
// for the default time-sharing one, "rr" or "fifo" when the bench runs at
// real-time priority (chrt), where no thread of the machine's time-sharing
// processes, the bench's own included, preempts it. The latency figures
// of the two differ on a small machine; each JSON line says which it is.
func schedPolicy() string {
	p, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	if errno != 0 {
		return ""
	}
	switch p &^ 0x40000000 { // SCHED_RESET_ON_FORK
	case 0:
		return "other"
	case 1:
		return "fifo"
	case 2:
		return "rr"
	case 3:
		return "batch"
	case 5:
		return "idle"
	}
	return ""
}
