package main

import (
	"cmp"
	"net"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/node"
)

// kubeletConfiguration is the effective configuration in upstream's KubeletConfiguration shape, as /configz
// shows it: every field the kubelet honours, from its flags and defaults.
func (o *options) kubeletConfiguration() *kubeletconfig.KubeletConfiguration {
	taints, _ := node.ParseTaints(o.registerTaints) // validated at start
	var regTaints []v1.Taint
	for _, t := range taints {
		regTaints = append(regTaints, t)
	}
	return &kubeletconfig.KubeletConfiguration{
		TypeMeta:      metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: kubeletconfig.SchemeGroupVersion.String()},
		EnableServer:  ptr.To(true),
		StaticPodPath: o.podManifestPath,
		PodLogsDir:    o.podLogsDir,
		SyncFrequency: metav1.Duration{Duration: o.syncFrequency},
		Address:       o.address,
		Port:          int32(o.port),
		Authentication: kubeletconfig.KubeletAuthentication{
			X509:      kubeletconfig.KubeletX509Authentication{ClientCAFile: o.clientCAFile},
			Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:                          kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeWebhook},
		EventRecordQPS:                         ptr.To(int32(o.eventQPS)),
		EventBurst:                             int32(o.eventBurst),
		HealthzPort:                            ptr.To(int32(o.healthzPort)),
		HealthzBindAddress:                     net.IPv4(127, 0, 0, 1).String(),
		ClusterDomain:                          o.clusterDomain,
		ClusterDNS:                             o.clusterDNS,
		CgroupRoot:                             o.cgroupRoot,
		CgroupsPerQOS:                          ptr.To(true),
		CgroupDriver:                           o.cgroupDriver,
		MaxPods:                                int32(o.maxPods),
		PodPidsLimit:                           ptr.To(o.podMaxPIDs),
		ResolverConfig:                         ptr.To(o.resolvConf),
		KubeAPIQPS:                             ptr.To(int32(o.kubeAPIQPS)),
		KubeAPIBurst:                           int32(o.kubeAPIBurst),
		SerializeImagePulls:                    ptr.To(false),
		MaxParallelImagePulls:                  ptr.To(int32(o.imagePullParallel)),
		ImagePullCredentialsVerificationPolicy: kubeletconfig.ImagePullCredentialsVerificationPolicy(o.pullPolicy()),
		PreloadedImagesVerificationAllowlist:   o.preloadedAllowlist,
		UserNamespaces:                         &kubeletconfig.UserNamespaces{IDsPerPod: ptr.To(int64(o.userNamespaceIDs()))},
		ContainerLogMaxSize:                    o.containerLogMaxSize,
		ContainerLogMaxFiles:                   ptr.To(int32(o.containerLogMaxFiles)),
		ContainerLogMaxWorkers:                 ptr.To(int32(1)),
		ContainerLogMonitorInterval:            &metav1.Duration{Duration: o.containerLogMonitorInterval},
		AllowedUnsafeSysctls:                   o.allowedUnsafeSysctls,
		RegisterWithTaints:                     regTaints,
		RegisterNode:                           ptr.To(o.registerNode),
		ContainerRuntimeEndpoint:               o.runtimeEndpoint,
		EnableProfilingHandler:                 ptr.To(true),
		EnableDebuggingHandlers:                ptr.To(true),
		EnableSystemLogHandler:                 ptr.To(true),
		NodeStatusUpdateFrequency:              metav1.Duration{Duration: 10 * time.Second},
		NodeStatusReportFrequency:              metav1.Duration{Duration: 5 * time.Minute},
		NodeLeaseDurationSeconds:               int32(cmp.Or(o.nodeLeaseDuration, node.DefaultLeaseDuration) / time.Second),
		CPUCFSQuota:                            ptr.To(true),
		CPUCFSQuotaPeriod:                      &metav1.Duration{Duration: 100 * time.Millisecond},
		TLSCertFile:                            o.tlsCertFile,
		TLSPrivateKeyFile:                      o.tlsKeyFile,
		ShutdownGracePeriod:                    metav1.Duration{Duration: o.shutdownGracePeriod},
		ShutdownGracePeriodCriticalPods:        metav1.Duration{Duration: o.shutdownGracePeriodCriticalPods},
		ShutdownGracePeriodByPodPriority:       o.shutdownByPriority,
		FailCgroupV1:                           ptr.To(o.failCgroupV1),
		FailSwapOn:                             ptr.To(o.failSwapOn),
		MemorySwap:                             kubeletconfig.MemorySwapConfiguration{SwapBehavior: o.swapBehavior},
		CrashLoopBackOff: kubeletconfig.CrashLoopBackOffConfig{
			MaxContainerRestartPeriod: &metav1.Duration{Duration: cmp.Or(o.crashLoopBackOffMax, 300*time.Second)}},
	}
}
