# One failing NVMe drive is one page, end to end: a live Prometheus on the host scrapes the daemon in the guest with the shipped rules and sends its alerts to a live Alertmanager with the shipped routing. With the controller's critical warning injected (spare below threshold and reliability degraded: 1 | 4) the drive raises DiskpulseSmartUnhealthy and DiskpulseNvmeCriticalWarning for each bit, and exactly one notification for it reaches the receivers: to the pager, holding only the alert that explains the rest. Nothing reaches them before.
# timeout: 180
# prometheus: 1
# alertmanager: yes
NV=nvme0n1 CTRL=nvme0
smart_up() { scrape && [ "$(metric "diskpulse_smart_up{device=\"$NV\"}")" = 1 ]; }
warning() {
	qmp "{\"execute\":\"qom-set\",\"arguments\":{\"path\":\"/machine/peripheral/$CTRL\",\"property\":\"smart_critical_warning\",\"value\":$1}}" >/dev/null
}
# about NAME: the notifications that concern the failing drive
about() { notifications | grep "@$NV\\b"; }
check "critical warning cleared" warning 0
daemon_start --smart.interval=2s || exit 1
check "SMART read of $NV" wait_for 30 smart_up
check "the host's Prometheus scrapes the daemon" wait_for 60 prom_has 'up{job="diskpulse"} == 1'
check "Prometheus has $NV healthy" wait_for 30 prom_has "diskpulse_smart_healthy{device=\"$NV\"} == 1"
# Rules are evaluated every second and group_wait is 1 s: anything pending would be out by now.
sleep 5
note "alerts pending or firing so far: $(alerts_seen)"
check "no notification before the injection ($(notifications | tr '\n' ';'))" [ -z "$(notifications)" ]

check "critical warning 5 injected (spare, reliability)" warning 5
check "Prometheus: DiskpulseSmartUnhealthy fires for $NV" wait_for 60 firing DiskpulseSmartUnhealthy "device=\"$NV\""
check "Prometheus: DiskpulseNvmeCriticalWarning fires for both bits" wait_for 30 eval \
	'[ "$(prom "count(ALERTS{alertstate=\"firing\",alertname=\"DiskpulseNvmeCriticalWarning\",device=\"$NV\"})" | grep -o "\"[0-9]*\"]" )" = "\"2\"]" ]'
check "a notification for $NV reached a receiver" wait_for 30 eval '[ -n "$(about)" ]'
# Every alert of the drive is in the same group (instance, device): a second notification could
# only come from a group of its own, flushed 1 s (group_wait) after its first alert; wait well past.
sleep 15
note "alerts pending or firing: $(alerts_seen)"
note "notifications: $(notifications | tr '\n' ';')"
check "exactly one notification for $NV ($(about | wc -l))" [ "$(about | wc -l)" = 1 ]
check "... to the pager" eval 'about | grep -q "^diskpulse-page firing "'
check "... holding only DiskpulseSmartUnhealthy, the rest inhibited" \
	eval '[ "$(about | cut -d" " -f3)" = "DiskpulseSmartUnhealthy@$NV" ]'
check "critical warning cleared again" warning 0
check "daemon exits 0" daemon_stop
