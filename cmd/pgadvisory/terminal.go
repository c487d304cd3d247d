package main

import (
	"io"
	"os"
)

// isTerminal reports whether w is a terminal (a character device, as
// /dev/tty is), the only place that screen-clearing codes belong.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
