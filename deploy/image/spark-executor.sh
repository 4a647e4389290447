#!/usr/bin/env bash
# A Spark executor in a pod of Spark on Kubernetes (the command of the executor pod
# template a `zync build` chart writes; Spark adds the argument `executor`). Spark gives
# what the executor needs as environment variables: the driver's URL, the executor's id,
# cores, memory, the application's id, the pod's address and name, its JVM options
# (SPARK_JAVA_OPT_0, _1, ... in order) and extra class path (SPARK_CLASSPATH). The jars
# zync's driver adds (Delta, s3a) come from the driver over spark.jars. The Python of the
# image runs the Python workers (the driver's spark.pyspark.python: the same path here).
set -euo pipefail
[ "${1:-}" = executor ] && shift
spark_home="${SPARK_HOME:-$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}"
options=()
while IFS= read -r option; do
  options+=("$option")
done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | cut -d= -f2-)
classpath="$spark_home/conf:$spark_home/jars/*${SPARK_CLASSPATH:+:$SPARK_CLASSPATH}"
exec java "${options[@]}" -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" \
  -cp "$classpath" org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
  --driver-url "$SPARK_DRIVER_URL" \
  --executor-id "$SPARK_EXECUTOR_ID" \
  --cores "$SPARK_EXECUTOR_CORES" \
  --app-id "$SPARK_APPLICATION_ID" \
  --hostname "$SPARK_EXECUTOR_POD_IP" \
  --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
  --podName "$SPARK_EXECUTOR_POD_NAME"
