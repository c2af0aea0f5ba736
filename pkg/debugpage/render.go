package debugpage

import (
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nodeagent/kubelet/internal/httpjson"
)

// refreshScript polls the page's JSON every 3 s: it updates each pod's state, phase and sentence in place,
// and reloads the page when pods come or go or a timeline grows. Everything it writes goes through
// textContent, never as HTML.
const refreshScript = `(function () {
  var known = document.body.getAttribute("data-shape");
  function shape(p) { return p.pods.map(function (x) { return x.uid + ":" + (x.timeline || []).length; }).join(","); }
  function tick() {
    fetch(location.pathname, {headers: {Accept: "application/json"}, credentials: "same-origin"})
      .then(function (r) { return r.json(); })
      .then(function (p) {
        if (shape(p) !== known) { location.reload(); return; }
        p.pods.forEach(function (x) {
          ["state", "phase", "whyNotReady"].forEach(function (f) {
            var el = document.querySelector('[data-uid="' + x.uid + '"] [data-field="' + f + '"]');
            if (el) { el.textContent = x[f] || (f === "whyNotReady" ? "Ready" : ""); }
          });
          // The sentence's prefix and colour follow it: a pod becoming Ready, or no longer, shows so.
          var why = document.querySelector('[data-uid="' + x.uid + '"] [data-field="whyNotReady"]');
          var pre = document.querySelector('[data-uid="' + x.uid + '"] [data-field="whyPrefix"]');
          if (why) { why.className = x.whyNotReady ? "" : "ok"; }
          if (pre) { pre.textContent = x.whyNotReady ? "Not Ready: " : ""; }
        });
        var g = document.getElementById("generated");
        if (g) { g.textContent = p.generated; }
      })
      .catch(function () {});
  }
  setInterval(tick, 3000);
})();`

// scriptHash allows the refresh script, and only it, in the page's Content-Security-Policy.
var scriptHash = func() string {
	sum := sha256.Sum256([]byte(refreshScript))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}()

// ContentSecurityPolicy is the page's Content-Security-Policy: nothing from elsewhere, no script but the
// page's refresh, no form, no framing. The kubelet's other HTML (the /logs/ listing) carries it too.
var ContentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; script-src '" + scriptHash +
	"'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"ms":    short,
	"ago":   func(now, t time.Time) string { return ago(now, t) },
	"in":    func(now, t time.Time) string { return t.Sub(now).Round(time.Second).String() },
	"shape": shape,
	"js":    func() template.JS { return template.JS(refreshScript) },
	"since": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Node.Name}}: pods</title>
<meta name="viewport" content="width=device-width">
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin:1.2em 0 .3em}
table{border-collapse:collapse;margin:.3em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
.bad{color:#b00020;font-weight:600}.ok{color:#1b5e20;font-weight:600}.why{font-weight:600}
.slowest{background:#fff3cd}.pod{border-top:2px solid #888;margin-top:1em;padding-top:.3em}
code{white-space:pre-wrap}
</style></head>
<body data-shape="{{shape .}}">
<h1>Node {{.Node.Name}}: {{if .Node.Ready}}<span class="ok">Ready</span>{{else}}<span class="bad">NotReady</span>{{end}}</h1>
<p>Generated <span id="generated">{{.Generated.UTC.Format "2006-01-02T15:04:05Z07:00"}}</span>.</p>
<table>
{{if .Node.ReadyMessage}}<tr><th>Ready</th><td>{{.Node.ReadyMessage}}</td></tr>{{end}}
{{range .Node.Failures}}<tr><th>failing check</th><td class="bad">{{.}}</td></tr>{{end}}
<tr><th>last relist</th><td>{{ago $.Generated .Node.LastRelist}} ago, took {{ms .Node.RelistTook}}</td></tr>
{{range .Node.Stuck}}<tr><th>stuck runtime call</th><td class="bad">{{.Call}} of pod {{.Pod}}, for {{ms .Since}}</td></tr>{{end}}
<tr><th>runtime</th><td>{{if .Node.RuntimeReady}}ready{{else}}<span class="bad">not ready</span> {{.Node.RuntimeMessage}}{{end}}</td></tr>
<tr><th>network</th><td>{{if .Node.NetworkReady}}ready{{else}}<span class="bad">not ready</span> {{.Node.NetworkMessage}}{{end}}</td></tr>
<tr><th>API server</th><td>{{if .Node.APIReachable}}reachable{{else}}<span class="bad">unreachable</span>{{end}}; Lease renewed {{ago $.Generated .Node.LastLease}} ago</td></tr>
{{with .Node.Offline}}<tr><th>Offline</th><td><span class="bad">running from the checkpoint</span> for {{ago $.Generated .Since}}: {{range $i, $p := .Pods}}{{if $i}}, {{end}}{{$p}}{{else}}no pod{{end}}</td></tr>
{{end}}<tr><th>cgroups</th><td>{{.Node.CgroupMode}}, {{.Node.CgroupDriver}} driver</td></tr>
{{range .Node.Plugins}}<tr><th>plugin {{.Name}}</th><td>{{.Type}} at {{.Endpoint}} (registered through {{.Socket}}){{if .Error}} <span class="bad">refused: {{.Error}}</span>{{end}}</td></tr>{{end}}
{{range .Node.Devices}}<tr><th>devices {{.Name}}</th><td>{{if .Plugin}}plugin {{.Plugin}}{{else}}<span class="bad">plugin gone {{ms .PluginGone}} ago</span>{{end}}: {{.Devices}} devices, {{.Healthy}} healthy, {{.Held}} held by containers</td></tr>{{end}}
</table>
<h2>Pods ({{len .Pods}})</h2>
{{range .Pods}}<div class="pod" data-uid="{{.UID}}">
<p><b>{{.Namespace}}/{{.Name}}</b> &middot; <span data-field="state">{{.State}}</span> &middot; <span data-field="phase">{{.Phase}}</span> &middot; {{.QOS}} &middot; {{.Syncs}} syncs &middot; age {{ms .Age}}</p>
<p class="why"><span data-field="whyPrefix">{{if .WhyNotReady}}Not Ready: {{end}}</span>{{if .WhyNotReady}}<span data-field="whyNotReady">{{.WhyNotReady}}</span>{{else}}<span data-field="whyNotReady" class="ok">Ready</span>{{end}}</p>
{{if .WaitingFor}}<p class="bad">waiting for <span data-field="waitingFor">{{.WaitingFor}}</span></p>{{end}}
{{if .LastSyncError}}<p class="bad">last sync error: <code>{{.LastSyncError}}</code></p>{{end}}
{{if .Conditions}}<table><tr><th>condition</th><th>status</th><th>reason</th><th>message</th></tr>
{{range .Conditions}}<tr><td>{{.Type}}</td><td>{{.Status}}</td><td>{{.Reason}}</td><td>{{.Message}}</td></tr>{{end}}</table>{{end}}
{{if .Backoffs}}<table><tr><th>back-off</th><th>reason</th><th>until</th></tr>
{{range .Backoffs}}<tr><td>{{.What}}</td><td>{{.Reason}}</td><td>{{since .Until}} (in {{in $.Generated .Until}})</td></tr>{{end}}</table>{{end}}
{{if .Timeline}}<table><tr><th>startup step</th><th>done at</th><th>took</th><th>detail</th></tr>
{{range .Timeline}}<tr{{if .Slowest}} class="slowest"{{end}}><td>{{.Name}}</td><td>{{since .At}}</td><td>{{ms .Took}}</td><td>{{.Detail}}</td></tr>{{end}}</table>{{end}}
{{if .Probes}}<table><tr><th>probe</th><th>result</th><th>at</th><th>output</th></tr>
{{range .Probes}}<tr><td>{{.Container}} {{.Type}}</td><td>{{.Result}}</td><td>{{since .At}}</td><td><code>{{.Output}}</code></td></tr>{{end}}</table>{{end}}
</div>
{{end}}
<script>{{js}}</script>
</body></html>
`))

func shape(p *Page) string {
	var parts []string
	for _, x := range p.Pods {
		parts = append(parts, x.UID+":"+strconv.Itoa(len(x.Timeline)))
	}
	return strings.Join(parts, ",")
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return now.Sub(t).Round(time.Millisecond).String()
}

// Handler serves the page built by build at each request: JSON when the caller accepts it, else HTML.
func Handler(build func() *Page) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := build()
		if strings.Contains(r.Header.Get("Accept"), "application/json") {
			httpjson.Write(w, p)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		if err := page.Execute(w, p); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

// short rounds a duration for reading: to the millisecond, or to the microsecond below one.
func short(d time.Duration) string {
	if d > -time.Millisecond && d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
