//go:build nodetest

package node

import (
	"fmt"
	"os"
	"strings"
)

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndex(s, ") ")
	return i >= 0 && !strings.HasPrefix(s[i+2:], "Z")
}
