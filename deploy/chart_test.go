package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const chartDir = "chart/invledger"

// clusterValues renders the chart in Redis Cluster mode with every optional
// object on.
const clusterValues = chartDir + "/ci/cluster-values.yaml"

// kubeVersion is the cluster the chart is rendered and linted for: the
// oldest that runs a preStop sleep without a feature gate. A library build
// of helm would otherwise assume v1.20.
var kubeVersion = &chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}

// object is one rendered manifest, decoded into its Kubernetes API type.
type object struct {
	source string // the template it came from
	obj    any    // a pointer to the API type of its kind
}

// kinds are the API types a manifest of the chart may decode into: a kind
// missing here is an error, so nothing rendered escapes the checks.
var kinds = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                     func() any { return &appsv1.StatefulSet{} },
	"batch/v1/Job":                            func() any { return &batchv1.Job{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
}

// render is `helm template` with the chart's defaults overlaid by
// valuesFiles, then overrides: every manifest and hook, each as written
// and in the source order of the templates.
func render(t *testing.T, overrides map[string]any, valuesFiles ...string) []string {
	t.Helper()
	docs, err := renderChart(overrides, valuesFiles...)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func renderChart(overrides map[string]any, valuesFiles ...string) ([]string, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	vals := map[string]any{}
	for _, f := range valuesFiles {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, err
		}
		vals = chartutil.CoalesceTables(v, vals)
	}
	vals = chartutil.CoalesceTables(overrides, vals)
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace, install.KubeVersion = "shop", "sales", kubeVersion
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("helm template: %w", err)
	}
	docs := splitManifests(rel.Manifest)
	for _, h := range rel.Hooks {
		docs = append(docs, splitManifests("# Source: "+h.Path+"\n"+h.Manifest)...)
	}
	return docs, nil
}

var (
	documentSeparator = regexp.MustCompile(`(?m)^---\s*$`)
	sourceLine        = regexp.MustCompile(`(?m)^# Source: (\S+)`) // helm's comment naming a manifest's template
)

// splitManifests cuts a stream of YAML documents, keeping those that hold
// more than comments.
func splitManifests(stream string) []string {
	var docs []string
	for _, doc := range documentSeparator.Split(stream, -1) {
		for _, line := range strings.Split(doc, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				docs = append(docs, doc)
				break
			}
		}
	}
	return docs
}

// decode decodes every document strictly into its API type: an unknown
// field, a duplicate one or an unknown kind is an error.
func decode(docs []string) ([]object, error) {
	var objs []object
	for _, doc := range docs {
		source := "?"
		if m := sourceLine.FindStringSubmatch(doc); m != nil {
			source = m[1]
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
		if !ok {
			return nil, fmt.Errorf("%s: kind %s/%s is not one the checks know", source, tm.APIVersion, tm.Kind)
		}
		obj := newObj()
		if err := unmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", source, tm.Kind, err)
		}
		objs = append(objs, object{source, obj})
	}
	return objs, nil
}

// unmarshalStrict decodes YAML as the API server does in strict mode:
// field names match case-sensitively (encoding/json would take
// "targetport" for targetPort), and an unknown or duplicate field is an
// error.
func unmarshalStrict(doc []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	return errors.Join(append(strict, err)...)
}

// workload is one pod template of the chart: a Deployment's, a
// StatefulSet's or a Job's.
type workload struct {
	name   string
	kind   string
	hooks  string // helm.sh/hook
	labels map[string]string
	spec   *corev1.PodSpec
}

func workloads(objs []object) []workload {
	var ws []workload
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			ws = append(ws, workload{v.Name, "Deployment", v.Annotations["helm.sh/hook"], v.Spec.Template.Labels, &v.Spec.Template.Spec})
		case *appsv1.StatefulSet:
			ws = append(ws, workload{v.Name, "StatefulSet", v.Annotations["helm.sh/hook"], v.Spec.Template.Labels, &v.Spec.Template.Spec})
		case *batchv1.Job:
			ws = append(ws, workload{v.Name, "Job", v.Annotations["helm.sh/hook"], v.Spec.Template.Labels, &v.Spec.Template.Spec})
		}
	}
	return ws
}

// secretVars are the settings that carry credentials: each must come from
// a Secret, never be a plain value.
var secretVars = []string{"INVLEDGER_DATABASE_URL", "INVLEDGER_REDIS_URL", "INVLEDGER_REDIS_CLUSTER",
	"INVLEDGER_REDIS_SENTINELS", "INVLEDGER_TOKENS", "INVLEDGER_CONSOLE_KEY", "INVLEDGER_ALERT_WEBHOOK",
	"INVLEDGER_ALERT_WEBHOOK_SECRET", "INVLEDGER_API_TOKEN", "INVLEDGER_SEAL_KEYS",
	"INVLEDGER_EXPORT_NATS_URL", "INVLEDGER_EXPORT_AMQP_URL"}

// credentialsInURL finds a URL with a password in it.
var credentialsInURL = regexp.MustCompile(`://[^/@\s]*:[^/@\s]+@`)

// shutdownBudget is how long serve may take to stop after SIGTERM, in
// seconds: http.Server.Shutdown and the projector's router close are given
// 15 s each, side by side, then the trace exporter 5 s to flush.
const shutdownBudget = 15 + 5

// check returns every way the rendered chart breaks what docs/deploy.md
// promises.
func check(objs []object) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	ws := workloads(objs)
	reconcilers, migrateHooks := 0, 0
	for _, w := range ws {
		at := w.kind + " " + w.name
		checkPodSecurity(at, w.spec, bad)
		if w.spec.AutomountServiceAccountToken == nil || *w.spec.AutomountServiceAccountToken {
			bad("%s: mounts a service account token, and nothing in it calls the Kubernetes API", at)
		}
		if len(w.spec.Containers) != 1 {
			bad("%s: %d containers, want 1", at, len(w.spec.Containers))
			continue
		}
		c := w.spec.Containers[0]
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
			if slices.Contains(secretVars, e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				bad("%s: %s is not read from a Secret (secretKeyRef)", at, e.Name)
			}
			if credentialsInURL.MatchString(e.Value) {
				bad("%s: %s has a password in plain text", at, e.Name)
			}
		}
		if e := env["INVLEDGER_DATABASE_URL"]; e.ValueFrom == nil {
			bad("%s: no INVLEDGER_DATABASE_URL", at)
		}
		if w.kind == "Job" {
			if !slices.Equal(c.Args, []string{"migrate"}) {
				bad("%s: runs %v, want [migrate]", at, c.Args)
			}
			hooks := strings.Split(w.hooks, ",")
			if slices.Contains(hooks, "pre-install") && slices.Contains(hooks, "pre-upgrade") {
				migrateHooks++
			} else {
				bad("%s: helm.sh/hook is %q, want pre-install,pre-upgrade", at, w.hooks)
			}
			continue
		}
		if len(c.Args) == 0 || c.Args[0] != "serve" {
			bad("%s: runs %v, want serve", at, c.Args)
		}
		if slices.Contains(c.Args, "--allow-volatile-redis") {
			bad("%s: --allow-volatile-redis: a Redis restart would lose acknowledged sales", at)
		}
		components := strings.Split(env["INVLEDGER_COMPONENTS"].Value, ",")
		if slices.Contains(components, "reconciler") {
			reconcilers++
		}
		want, other := "api", "projector"
		if w.kind == "StatefulSet" {
			want, other = other, want
		}
		if !slices.Contains(components, want) || slices.Contains(components, other) {
			bad("%s: components %v, want %s and not %s", at, components, want, other)
		}
		checkServeContainer(at, w.spec, c, env, bad)
		switch w.kind {
		case "Deployment":
			checkTokensFile(at, w.spec, c, env, bad)
		case "StatefulSet":
			if e := env["INVLEDGER_CONSUMER_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				bad("%s: INVLEDGER_CONSUMER_NAME is not the pod's name, so a restarted projector would not take back its pending entries", at)
			}
		}
		if !coveredByPDB(objs, w.labels) {
			bad("%s: no PodDisruptionBudget selects its pods", at)
		}
	}
	if reconcilers != 1 {
		bad("%d workloads run the reconciler, want 1", reconcilers)
	}
	if migrateHooks != 1 {
		bad("%d migrate hook Jobs, want 1", migrateHooks)
	}
	for _, o := range objs {
		if _, ok := o.obj.(*corev1.Secret); ok {
			bad("%s: renders a Secret, so its contents would be in the values", o.source)
		}
	}
	return problems
}

// checkPodSecurity: non-root with a numeric user, read-only root, no
// privilege escalation, no capability.
func checkPodSecurity(at string, spec *corev1.PodSpec, bad func(string, ...any)) {
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	for _, c := range spec.Containers {
		at := at + " container " + c.Name
		sc := c.SecurityContext
		if sc == nil {
			bad("%s: no securityContext", at)
			continue
		}
		nonRoot, user := psc.RunAsNonRoot, psc.RunAsUser
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
		if sc.RunAsUser != nil {
			user = sc.RunAsUser
		}
		if nonRoot == nil || !*nonRoot {
			bad("%s: runAsNonRoot is not true", at)
		}
		if user == nil || *user == 0 {
			bad("%s: runs as root or as the image's user, want a numeric non-root runAsUser", at)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			bad("%s: root filesystem is writable", at)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad("%s: allows privilege escalation", at)
		}
		if sc.Privileged != nil && *sc.Privileged {
			bad("%s: privileged", at)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			bad("%s: capabilities are not all dropped", at)
		}
	}
}

// checkServeContainer: probes, listen address, data dir, graceful stop,
// resource requests.
func checkServeContainer(at string, spec *corev1.PodSpec, c corev1.Container, env map[string]corev1.EnvVar, bad func(string, ...any)) {
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
			bad("%s: no %s probe on GET %s", at, name, path)
			return
		}
		port := p.HTTPGet.Port
		if port.IntValue() != 8080 && !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool {
			return cp.Name == port.String() && cp.ContainerPort == 8080
		}) {
			bad("%s: %s probe on port %s, not the listen port 8080", at, name, port.String())
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")
	if v := env["INVLEDGER_LISTEN"].Value; v != "0.0.0.0:8080" {
		bad("%s: INVLEDGER_LISTEN is %q, want 0.0.0.0:8080", at, v)
	}
	dir := env["INVLEDGER_DATA_DIR"].Value
	mount := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
	if dir == "" || mount < 0 {
		bad("%s: INVLEDGER_DATA_DIR %q is not a mounted volume", at, dir)
	} else if v := volume(spec, c.VolumeMounts[mount].Name); v == nil || v.EmptyDir == nil || c.VolumeMounts[mount].ReadOnly {
		bad("%s: the data dir %s is not a writable emptyDir", at, dir)
	}
	var sleep int64
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds <= 0 {
		bad("%s: no preStop sleep, so the load balancer may still send requests after SIGTERM", at)
	} else {
		sleep = c.Lifecycle.PreStop.Sleep.Seconds
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g < sleep+shutdownBudget {
		bad("%s: terminationGracePeriodSeconds is below the preStop sleep (%d s) plus serve's shutdown (%d s)", at, sleep, shutdownBudget)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		bad("%s: no cpu and memory requests", at)
	}
}

// checkTokensFile: the API reads its tokens from a file of a mounted Secret.
func checkTokensFile(at string, spec *corev1.PodSpec, c corev1.Container, env map[string]corev1.EnvVar, bad func(string, ...any)) {
	file := env["INVLEDGER_TOKENS_FILE"].Value
	for _, m := range c.VolumeMounts {
		if file != "" && strings.HasPrefix(file, m.MountPath+"/") {
			if v := volume(spec, m.Name); v != nil && v.Secret != nil {
				return
			}
		}
	}
	bad("%s: INVLEDGER_TOKENS_FILE %q is not in a mounted Secret", at, file)
}

func volume(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func coveredByPDB(objs []object, podLabels map[string]string) bool {
	for _, o := range objs {
		if pdb, ok := o.obj.(*policyv1.PodDisruptionBudget); ok {
			if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(podLabels)) {
				return true
			}
		}
	}
	return false
}

// envOf returns a variable of the first container of the first workload of kind.
func envOf(objs []object, kind, name string) (corev1.EnvVar, bool) {
	for _, w := range workloads(objs) {
		if w.kind == kind {
			for _, e := range w.spec.Containers[0].Env {
				if e.Name == name {
					return e, true
				}
			}
		}
	}
	return corev1.EnvVar{}, false
}

// TestChartLintsAndRendersSafeManifests lints and renders the chart with
// its defaults and in cluster mode, and checks every point of
// docs/deploy.md on the decoded manifests.
func TestChartLintsAndRendersSafeManifests(t *testing.T) {
	sentinel := map[string]any{"redis": map[string]any{"mode": "sentinel", "sentinelMaster": "sales"}}
	for _, tc := range []struct {
		name        string
		valuesFiles []string
		overrides   map[string]any
		redisVars   []string // the Redis settings the pods get
		noRedisVar  string   // and one they must not
	}{
		{"defaults", nil, nil, []string{"INVLEDGER_REDIS_URL"}, "INVLEDGER_REDIS_CLUSTER"},
		{"cluster", []string{clusterValues}, nil, []string{"INVLEDGER_REDIS_CLUSTER"}, "INVLEDGER_REDIS_URL"},
		{"sentinel", nil, sentinel, []string{"INVLEDGER_REDIS_URL", "INVLEDGER_REDIS_SENTINELS", "INVLEDGER_REDIS_SENTINEL_MASTER"}, "INVLEDGER_REDIS_CLUSTER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := map[string]any{}
			for _, f := range tc.valuesFiles {
				v, err := chartutil.ReadValuesFile(f)
				if err != nil {
					t.Fatal(err)
				}
				vals = v
			}
			lint := action.NewLint()
			lint.Strict, lint.KubeVersion = true, kubeVersion
			res := lint.Run([]string{chartDir}, chartutil.CoalesceTables(tc.overrides, vals))
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				}
			}
			for _, err := range res.Errors {
				t.Errorf("helm lint: %v", err)
			}

			objs, err := decode(render(t, tc.overrides, tc.valuesFiles...))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range check(objs) {
				t.Error(p)
			}
			for _, kind := range []string{"Deployment", "StatefulSet", "Job"} {
				for _, name := range tc.redisVars {
					if _, ok := envOf(objs, kind, name); !ok {
						t.Errorf("%s: no %s", kind, name)
					}
				}
				if _, ok := envOf(objs, kind, tc.noRedisVar); ok {
					t.Errorf("%s: %s set in %s mode", kind, tc.noRedisVar, tc.name)
				}
			}
		})
	}
}

// TestChartSettingsReachThePods: values reach the pods as the variables
// serve reads, the hardening settings included, and the settings that must
// match across pods are the same in both kinds.
func TestChartSettingsReachThePods(t *testing.T) {
	objs, err := decode(render(t, nil, clusterValues))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ kind, name, value string }{
		{"Deployment", "INVLEDGER_MAX_CONNS_PER_CLIENT", "64"},
		{"Deployment", "INVLEDGER_COMPONENTS", "api,reconciler"},
		{"StatefulSet", "INVLEDGER_COMPONENTS", "projector"},
		{"StatefulSet", "INVLEDGER_PROJECTOR_SUBSCRIBERS", "2"},
		{"Job", "INVLEDGER_PARTITIONS", "32"},
	} {
		if e, _ := envOf(objs, want.kind, want.name); e.Value != want.value {
			t.Errorf("%s: %s is %q, want %q", want.kind, want.name, e.Value, want.value)
		}
	}
	for _, name := range []string{"INVLEDGER_PARTITIONS", "INVLEDGER_WEBHOOK_ALLOW_NETS", "INVLEDGER_DURABILITY",
		"INVLEDGER_STREAM_RETENTION", "INVLEDGER_STREAM_ENTRIES", "INVLEDGER_SKU_LAYOUT", "INVLEDGER_RECONCILE_INTERVAL", "INVLEDGER_HOLD_MAX_TTL"} {
		api, _ := envOf(objs, "Deployment", name)
		proj, _ := envOf(objs, "StatefulSet", name)
		if api.Value == "" || api.Value != proj.Value {
			t.Errorf("%s: API pods %q, projector pods %q: must be set and match", name, api.Value, proj.Value)
		}
	}
	if e, _ := envOf(objs, "Deployment", "INVLEDGER_CONSOLE_KEY"); e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Error("API pods do not share the console key from the Secret")
	}
	// The projector pods seal the ledger: they need the seal keys, and
	// must not start without them (no optional reference).
	if e, _ := envOf(objs, "StatefulSet", "INVLEDGER_SEAL_KEYS"); e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Key != "seal-keys" || (e.ValueFrom.SecretKeyRef.Optional != nil && *e.ValueFrom.SecretKeyRef.Optional) {
		t.Errorf("projector pods do not read the seal keys from the Secret's seal-keys: %+v", e)
	}

	// Behind the ingress every client is an ingress pod: by default the
	// per-client cap is off, as it is for serve.
	defaults, err := decode(render(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if perClient, _ := envOf(defaults, "Deployment", "INVLEDGER_MAX_CONNS_PER_CLIENT"); perClient.Value != "0" {
		t.Errorf("by default INVLEDGER_MAX_CONNS_PER_CLIENT is %q, want 0 (no per-client cap)", perClient.Value)
	}
}

// TestChartExportRunsWhereItIsPlaced: export.enabled adds the export
// component to the pods of its placement alone, with the brokers' URLs
// from the Secret (optional keys) and its settings.
func TestChartExportRunsWhereItIsPlaced(t *testing.T) {
	for _, placement := range []string{"projector", "api"} {
		objs, err := decode(render(t, map[string]any{"export": map[string]any{"enabled": true, "placement": placement}}))
		if err != nil {
			t.Fatal(err)
		}
		if problems := check(objs); len(problems) > 0 {
			t.Fatalf("placement %s: %v", placement, problems)
		}
		for kind, runs := range map[string]bool{"StatefulSet": placement == "projector", "Deployment": placement == "api"} {
			components, _ := envOf(objs, kind, "INVLEDGER_COMPONENTS")
			if strings.HasSuffix(components.Value, ",export") != runs {
				t.Errorf("placement %s: %s components %q", placement, kind, components.Value)
			}
			url, _ := envOf(objs, kind, "INVLEDGER_EXPORT_NATS_URL")
			if url.ValueFrom == nil || url.ValueFrom.SecretKeyRef == nil || url.ValueFrom.SecretKeyRef.Key != "export-nats-url" ||
				url.ValueFrom.SecretKeyRef.Optional == nil || !*url.ValueFrom.SecretKeyRef.Optional {
				t.Errorf("placement %s: %s INVLEDGER_EXPORT_NATS_URL %+v", placement, kind, url)
			}
			if stream, _ := envOf(objs, kind, "INVLEDGER_EXPORT_NATS_STREAM"); stream.Value != "INVLEDGER_EVENTS" {
				t.Errorf("placement %s: %s INVLEDGER_EXPORT_NATS_STREAM %q", placement, kind, stream.Value)
			}
		}
	}
	off, err := decode(render(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"StatefulSet", "Deployment"} {
		if components, _ := envOf(off, kind, "INVLEDGER_COMPONENTS"); strings.Contains(components.Value, "export") {
			t.Errorf("export off: %s components %q", kind, components.Value)
		}
	}
	if _, err := renderChart(map[string]any{"export": map[string]any{"placement": "everywhere"}}); err == nil || !strings.Contains(err.Error(), "export.placement") {
		t.Errorf("a bad placement: %v", err)
	}
}

// TestChartMonitoringObjects: the optional objects render, decode strictly
// and carry the files of docs/, which the chart's copies equal.
func TestChartMonitoringObjects(t *testing.T) {
	for _, pair := range [][2]string{
		{"../docs/grafana/invledger.json", chartDir + "/files/grafana/invledger.json"},
		{"../docs/prometheus/alerts.yml", chartDir + "/files/prometheus/alerts.yml"},
	} {
		docs, err := os.ReadFile(pair[0])
		if err != nil {
			t.Fatal(err)
		}
		copied, err := os.ReadFile(pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(docs, copied) {
			t.Errorf("%s differs from %s: cp %[2]s %[1]s", pair[1], pair[0], pair[1], pair[0])
		}
	}
	dashboard, _ := os.ReadFile(chartDir + "/files/grafana/invledger.json")
	alerts, _ := os.ReadFile(chartDir + "/files/prometheus/alerts.yml")
	var wantRules monitoringv1.PrometheusRuleSpec
	if err := unmarshalStrict(alerts, &wantRules); err != nil {
		t.Fatalf("alerts.yml is not a rule file: %v", err)
	}

	objs, err := decode(render(t, nil, clusterValues))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *monitoringv1.ServiceMonitor:
			found["ServiceMonitor"] = len(v.Spec.Endpoints) == 1 && v.Spec.Endpoints[0].Port == "http" && v.Spec.Endpoints[0].Path == "/metrics"
		case *monitoringv1.PrometheusRule:
			got, _ := yaml.Marshal(v.Spec)
			want, _ := yaml.Marshal(wantRules)
			found["PrometheusRule"] = bytes.Equal(got, want)
		case *corev1.ConfigMap:
			if d, ok := v.Data["invledger.json"]; ok {
				found["dashboard"] = d == strings.TrimRight(string(dashboard), "\n")
			}
			if d, ok := v.Data["alerts.yml"]; ok {
				found["alerts"] = d == strings.TrimRight(string(alerts), "\n")
			}
		}
	}
	for _, name := range []string{"ServiceMonitor", "PrometheusRule", "dashboard", "alerts"} {
		if !found[name] {
			t.Errorf("%s: missing, or not what docs/ has", name)
		}
	}

	defaults, err := decode(render(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range defaults {
		switch o.obj.(type) {
		case *monitoringv1.ServiceMonitor, *monitoringv1.PrometheusRule, *corev1.ConfigMap:
			t.Errorf("%s: rendered although it is off by default", o.source)
		}
	}
}

// TestChartRefusesUnsafeValues: values the chart cannot honour fail the
// render, naming what to change.
func TestChartRefusesUnsafeValues(t *testing.T) {
	for _, tc := range []struct {
		overrides map[string]any
		want      string
	}{
		{map[string]any{"terminationGracePeriodSeconds": 20}, "terminationGracePeriodSeconds must be at least"},
		{map[string]any{"projector": map[string]any{"replicas": 0}}, "projector.replicas must be at least 1"},
		{map[string]any{"reconciler": map[string]any{"placement": "both"}}, "reconciler.placement"},
		{map[string]any{"redis": map[string]any{"mode": "sentinel"}}, "redis.sentinelMaster"},
		{map[string]any{"redis": map[string]any{"mode": "standalone"}}, "redis.mode"},
		{map[string]any{"secrets": map[string]any{"existingSecret": ""}}, "secrets.existingSecret"},
	} {
		if _, err := renderChart(tc.overrides); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %v: rendered with error %v, want one naming %q", tc.overrides, err, tc.want)
		}
	}
}

// TestChecksRejectUnsafeManifests: each mutation of the default render, or
// of its values, breaks one promise, and check must name it.
func TestChecksRejectUnsafeManifests(t *testing.T) {
	defaults := render(t, nil)
	spec := func(kind string, objs []object) *corev1.PodSpec {
		for _, w := range workloads(objs) {
			if w.kind == kind {
				return w.spec
			}
		}
		t.Fatalf("no %s", kind)
		return nil
	}
	container := func(kind string, objs []object) *corev1.Container { return &spec(kind, objs).Containers[0] }
	setEnv := func(c *corev1.Container, name string, e corev1.EnvVar) {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 {
			t.Fatalf("%s has no %s", c.Name, name)
		}
		c.Env[i] = e
	}
	root, yes := int64(0), true
	for _, tc := range []struct {
		name      string
		overrides map[string]any      // values to render with instead of the defaults
		mutate    func(objs []object) // applied to the decoded manifests
		want      string              // a part of the problem named
	}{
		{name: "root user in the pod", want: "runs as root",
			mutate: func(objs []object) {
				spec("Deployment", objs).SecurityContext.RunAsUser = &root
				container("Deployment", objs).SecurityContext.RunAsUser = nil
			}},
		{name: "root user in the container", want: "runs as root",
			mutate: func(objs []object) { container("StatefulSet", objs).SecurityContext.RunAsUser = &root }},
		{name: "root user from values", want: "runs as root",
			overrides: map[string]any{"securityContext": map[string]any{"runAsUser": 0}}},
		{name: "runAsNonRoot off", want: "runAsNonRoot",
			mutate: func(objs []object) { f := false; container("Job", objs).SecurityContext.RunAsNonRoot = &f }},
		{name: "writable root filesystem", want: "writable",
			mutate: func(objs []object) { container("Deployment", objs).SecurityContext.ReadOnlyRootFilesystem = nil }},
		{name: "privilege escalation", want: "privilege escalation",
			mutate: func(objs []object) { container("StatefulSet", objs).SecurityContext.AllowPrivilegeEscalation = &yes }},
		{name: "a capability added", want: "capabilities",
			mutate: func(objs []object) {
				container("Deployment", objs).SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
			}},
		{name: "volatile Redis allowed", want: "--allow-volatile-redis",
			overrides: map[string]any{"settings": map[string]any{"allowVolatileRedis": true}}},
		{name: "missing liveness probe", want: "liveness",
			mutate: func(objs []object) { container("Deployment", objs).LivenessProbe = nil }},
		{name: "readiness on the wrong path", want: "readiness",
			mutate: func(objs []object) { container("StatefulSet", objs).ReadinessProbe.HTTPGet.Path = "/healthz" }},
		{name: "listen on loopback", want: "INVLEDGER_LISTEN",
			mutate: func(objs []object) {
				setEnv(container("Deployment", objs), "INVLEDGER_LISTEN", corev1.EnvVar{Name: "INVLEDGER_LISTEN", Value: "127.0.0.1:8080"})
			}},
		{name: "data dir not mounted", want: "INVLEDGER_DATA_DIR",
			mutate: func(objs []object) { container("StatefulSet", objs).VolumeMounts = nil }},
		{name: "data dir not an emptyDir", want: "the data dir",
			mutate: func(objs []object) {
				spec("Deployment", objs).Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/invledger"}}
			}},
		{name: "no preStop sleep", want: "preStop",
			mutate: func(objs []object) { container("Deployment", objs).Lifecycle = nil }},
		{name: "grace period too short", want: "terminationGracePeriodSeconds",
			mutate: func(objs []object) { g := int64(10); spec("StatefulSet", objs).TerminationGracePeriodSeconds = &g }},
		{name: "token in a plain env value", want: "INVLEDGER_TOKENS is not read from a Secret",
			mutate: func(objs []object) {
				c := container("Deployment", objs)
				c.Env = append(c.Env, corev1.EnvVar{Name: "INVLEDGER_TOKENS", Value: "shop:gateway:0123456789abcdef"})
			}},
		{name: "token in plain values", want: "INVLEDGER_TOKENS is not read from a Secret",
			overrides: map[string]any{"extraEnv": []any{map[string]any{"name": "INVLEDGER_TOKENS", "value": "shop:gateway:0123456789abcdef"}}}},
		{name: "database URL in a plain env value", want: "INVLEDGER_DATABASE_URL is not read from a Secret",
			mutate: func(objs []object) {
				setEnv(container("Job", objs), "INVLEDGER_DATABASE_URL", corev1.EnvVar{Name: "INVLEDGER_DATABASE_URL", Value: "postgres://u@db/x"})
			}},
		{name: "password in another variable", want: "password in plain text",
			overrides: map[string]any{"extraEnv": []any{map[string]any{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "https://u:hunter2@otel:4318"}}}},
		{name: "a Secret in the chart", want: "renders a Secret",
			mutate: func(objs []object) {
				objs[0] = object{"injected", &corev1.Secret{StringData: map[string]string{"tokens": "x"}}}
			}},
		{name: "migrate not a hook", want: "helm.sh/hook",
			mutate: func(objs []object) {
				for _, o := range objs {
					if j, ok := o.obj.(*batchv1.Job); ok {
						delete(j.Annotations, "helm.sh/hook")
					}
				}
			}},
		{name: "projector named by its data dir", want: "INVLEDGER_CONSUMER_NAME",
			mutate: func(objs []object) {
				setEnv(container("StatefulSet", objs), "INVLEDGER_CONSUMER_NAME", corev1.EnvVar{Name: "INVLEDGER_CONSUMER_NAME"})
			}},
		{name: "reconciler in both kinds", want: "run the reconciler",
			mutate: func(objs []object) {
				setEnv(container("Deployment", objs), "INVLEDGER_COMPONENTS", corev1.EnvVar{Name: "INVLEDGER_COMPONENTS", Value: "api,reconciler"})
			}},
		{name: "tokens file outside a Secret", want: "INVLEDGER_TOKENS_FILE",
			mutate: func(objs []object) { spec("Deployment", objs).Volumes[1].Secret = nil }},
		{name: "no PodDisruptionBudget", want: "PodDisruptionBudget",
			mutate: func(objs []object) {
				for _, o := range objs {
					if pdb, ok := o.obj.(*policyv1.PodDisruptionBudget); ok {
						pdb.Spec.Selector.MatchLabels["app.kubernetes.io/component"] = "nothing"
					}
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := defaults
			if tc.overrides != nil {
				docs = render(t, tc.overrides)
			}
			objs, err := decode(docs)
			if err != nil {
				t.Fatal(err)
			}
			if tc.mutate != nil {
				tc.mutate(objs)
			}
			problems := check(objs)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("no problem names %q; got %q", tc.want, problems)
			}
		})
	}
}

// TestDecodeRejectsUnknownFields: a misspelt or misplaced field is an
// error, not silently dropped.
func TestDecodeRejectsUnknownFields(t *testing.T) {
	for _, doc := range []string{
		"# Source: x\napiVersion: apps/v1\nkind: Deployment\nspec:\n  replica: 2\n",
		"# Source: x\napiVersion: v1\nkind: Service\nspec:\n  ports:\n    - port: 80\n      targetport: http\n",
		"# Source: x\napiVersion: v1\nkind: Pod\n",
	} {
		if _, err := decode([]string{doc}); err == nil {
			t.Errorf("decoded without error:\n%s", doc)
		}
	}
}
