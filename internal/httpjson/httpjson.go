package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write answers v as JSON with status 200, or a 500 naming the encoding error.
func Write(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
