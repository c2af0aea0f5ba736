package podspec

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// EnvFileValue returns key's value in an env file (env[].valueFrom.fileKeyRef, the EnvFiles feature), read
// as upstream's kubelet 1.35 reads one: lines of KEY='value' (single quotes required; the quoted text taken
// literally, newlines included), blank lines and lines starting with # skipped, leading blanks ignored, a
// comment allowed after the closing quote. A blank between = and the quote gives an empty value; a blank
// before = is an error. found is false when no line defines key (the first definition wins, as upstream).
func EnvFileValue(r io.Reader, key string) (value string, found bool, err error) {
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimLeft(sc.Text(), " \t")
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, rest, ok := strings.Cut(text, "=")
		if !ok {
			return "", false, fmt.Errorf("invalid environment variable format at line %d: missing '='", line)
		}
		switch trimmed := strings.TrimRight(name, " \t"); {
		case trimmed == "":
			return "", false, fmt.Errorf("invalid environment variable format at line %d: empty variable name", line)
		case trimmed != name:
			return "", false, fmt.Errorf("invalid environment variable format at line %d: whitespace before '=' is not allowed", line)
		}
		if strings.TrimLeft(rest, " \t") != rest {
			// KEY= 'x' assigns the empty string, as a shell does.
			if name == key {
				return "", true, nil
			}
			continue
		}
		if !strings.HasPrefix(rest, "'") {
			return "", false, fmt.Errorf("invalid environment variable format at line %d: value must be enclosed in single quotes", line)
		}
		rest = rest[1:]
		start := line
		var b strings.Builder
		for {
			if i := strings.IndexByte(rest, '\''); i >= 0 {
				b.WriteString(rest[:i])
				if after := strings.TrimLeft(rest[i+1:], " \t"); after != "" && !strings.HasPrefix(after, "#") {
					return "", false, fmt.Errorf("invalid environment variable format at line %d: unexpected content after closing quote", line)
				}
				break
			}
			b.WriteString(rest)
			b.WriteByte('\n')
			if !sc.Scan() {
				if err := sc.Err(); err != nil {
					return "", false, err
				}
				return "", false, fmt.Errorf("invalid environment variable format starting at line %d: unclosed single quote", start)
			}
			line++
			rest = sc.Text()
		}
		if name == key {
			return b.String(), true, nil
		}
	}
	return "", false, sc.Err()
}
