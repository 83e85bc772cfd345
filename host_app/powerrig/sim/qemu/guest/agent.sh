#!/bin/sh
# The guest's command agent, on one virtio-serial port (the drive host's "sshd").
#  host -> guest: "<id> <base64 of a shell script> [<base64 of stdin>]\n"  runs it in the background
#                 "<id> SYNC\n"   answered at once with the guest's clock (builtins only: no fork)
#  guest -> host: "SYNC <id> <epoch s.us on arrival> <epoch s.us as it leaves>\n", or for a script
#                 "BEGIN <id> <epoch at start>" base64(stdout) "STDERR <id>" base64(stderr) "END <id> <rc> <epoch at end>"
# Scripts run concurrently (fio and nvme-cli at once); a lock (mkdir is atomic; busybox has no
# flock) keeps each reply whole on the port.
P=$1
exec 3<>"$P"
lock() { until mkdir /tmp/.agent.lock 2>/dev/null; do usleep 500; done; }
run() {
  id=$1; t0=$EPOCHREALTIME
  sh /tmp/.cmd.$id </tmp/.in.$id >/tmp/.out.$id 2>/tmp/.err.$id
  rc=$?; t1=$EPOCHREALTIME
  lock
  { echo "BEGIN $id $t0"; base64 /tmp/.out.$id; echo "STDERR $id"; base64 /tmp/.err.$id; echo "END $id $rc $t1"; } >&3
  rmdir /tmp/.agent.lock
  rm -f /tmp/.cmd.$id /tmp/.in.$id /tmp/.out.$id /tmp/.err.$id
}
while read -r id b64 in64 <&3; do
  t=$EPOCHREALTIME
  [ -z "$id" ] && continue
  if [ "$b64" = SYNC ]; then
    # NTP's four stamps: the clock on arrival ($t) and again as the answer leaves; the host takes
    # the time between out of its bounds, so what lies between (this glob: ~0.6 ms on TCG; the lock
    # while a script answers) widens nothing. No script between its start and its reply (each keeps
    # its /tmp/.cmd file until it has answered; only this loop starts one): answer with builtins only
    set -- /tmp/.cmd.*
    if [ -e "$1" ]; then
      lock; echo "SYNC $id $t $EPOCHREALTIME" >&3; rmdir /tmp/.agent.lock
    else
      echo "SYNC $id $t $EPOCHREALTIME" >&3
    fi
    continue
  fi
  echo "$b64" | base64 -d > /tmp/.cmd.$id 2>/dev/null
  if [ -n "$in64" ]; then echo "$in64" | base64 -d > /tmp/.in.$id 2>/dev/null; else : > /tmp/.in.$id; fi
  run "$id" &
done
