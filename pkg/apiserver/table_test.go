package apiserver

import (
	"bufio"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

// TestTables checks the Table answers kubectl get asks for: lists of every
// resource, and a watch whose first event alone carries the columns.
func TestTables(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	if _, err := ts.client.CoreV1().Pods("default").Create(ctx, testPod("p1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc := ts.client.CoreV1().RESTClient()
	for _, r := range ts.reg.All() {
		if r.Group != "" {
			continue
		}
		for _, include := range []string{"", "Object", "None"} {
			req := rc.Get().Resource(r.Name).SetHeader("Accept", tableAccept)
			if include != "" {
				req = req.Param("includeObject", include)
			}
			raw, err := req.DoRaw(ctx)
			if err != nil {
				t.Fatalf("table of %s: %v", r.Name, err)
			}
			var tbl metav1.Table
			if err := json.Unmarshal(raw, &tbl); err != nil || tbl.Kind != "Table" || len(tbl.ColumnDefinitions) == 0 {
				t.Fatalf("table of %s: %v %s", r.Name, err, raw)
			}
		}
	}

	body, err := rc.Get().Resource("pods").Namespace("default").Param("watch", "true").
		SetHeader("Accept", tableAccept).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	go func() {
		p := testPod("p2")
		_, _ = ts.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	}()
	sc := bufio.NewScanner(body)
	for i := 0; i < 2 && sc.Scan(); i++ {
		var ev struct {
			Type   string
			Object metav1.Table
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("watch event %d: %v", i, err)
		}
		if ev.Object.Kind != "Table" || len(ev.Object.Rows) != 1 || (i == 0) != (len(ev.Object.ColumnDefinitions) > 0) {
			t.Errorf("watch event %d: %s", i, sc.Bytes())
		}
	}
}
