package csidriver

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxVolumeIDLength is the CSI spec's general size limit for a string field (128 bytes).
const maxVolumeIDLength = 128

// reservedSuffixes are the endings of the names the driver keeps beside a volume's data in the state
// directory (its record, its block image, the record's temporary file, its log). A volume ID must not end with one,
// so that no volume's data path is another volume's record or image.
var reservedSuffixes = []string{recordSuffix, imageSuffix, tempSuffix, logSuffix}

// ValidateVolumeID checks that id can name a volume: non-empty, at most 128 bytes of printable UTF-8, no
// '/', not "." or "..", and not ending with a suffix the driver reserves (.json, .img, .tmp, .log). A valid ID is
// a single path element, so <state-dir>/<id> is always a direct child of the state directory. Callers map
// the error to codes.InvalidArgument.
func ValidateVolumeID(id string) error {
	switch {
	case id == "":
		return errors.New("volume ID is empty")
	case len(id) > maxVolumeIDLength:
		return fmt.Errorf("volume ID is %d bytes long, more than %d", len(id), maxVolumeIDLength)
	case !utf8.ValidString(id):
		return errors.New("volume ID is not valid UTF-8")
	case id == "." || id == "..":
		return fmt.Errorf("volume ID %q is not a name", id)
	case strings.ContainsRune(id, '/'):
		return fmt.Errorf("volume ID %q contains '/'", id)
	}
	for _, r := range id {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("volume ID %q contains the unprintable character %U", id, r)
		}
	}
	for _, s := range reservedSuffixes {
		if strings.HasSuffix(id, s) {
			return fmt.Errorf("volume ID %q ends with %q, which the driver keeps for its own files", id, s)
		}
	}
	return nil
}
