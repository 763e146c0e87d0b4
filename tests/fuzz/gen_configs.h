/*
 * gen_configs.h — the zoo.cfg seeds of fuzz_config (data for gen_corpus.c,
 * included once there). Real-world files first (modelled on ZooKeeper's
 * conf/zoo_sample.cfg, an ensemble member's, one with every key larchd
 * reads), then the corners of java.util.Properties syntax and values that
 * config.c must refuse.
 */
#ifndef LARCH_FUZZ_GEN_CONFIGS_H
#define LARCH_FUZZ_GEN_CONFIGS_H

static const struct {
    const char *name;
    const char *text;
} configs[] = {
    { "zoo_sample.cfg",
      "# The number of milliseconds of each tick\n"
      "tickTime=2000\n"
      "# The number of ticks that the initial \n"
      "# synchronization phase can take\n"
      "initLimit=10\n"
      "# The number of ticks that can pass between \n"
      "# sending a request and getting an acknowledgement\n"
      "syncLimit=5\n"
      "# the directory where the snapshot is stored.\n"
      "# do not use /tmp for storage, /tmp here is just \n"
      "# example sakes.\n"
      "dataDir=/tmp/zookeeper\n"
      "# the port at which the clients will connect\n"
      "clientPort=2181\n"
      "# the maximum number of client connections.\n"
      "# increase this if you need to handle more clients\n"
      "#maxClientCnxns=60\n"
      "#\n"
      "# The number of snapshots to retain in dataDir\n"
      "#autopurge.snapRetainCount=3\n"
      "# Purge task interval in hours\n"
      "# Set to \"0\" to disable auto purging feature\n"
      "#autopurge.purgeInterval=1\n"
      "\n"
      "## Metrics Providers\n"
      "#metricsProvider.className=org.apache.zookeeper.metrics.prometheus."
      "PrometheusMetricsProviderFactory\n"
      "#metricsProvider.httpPort=7000\n" },
    { "ensemble.cfg",
      "tickTime=2000\n"
      "dataDir=/var/lib/zookeeper\n"
      "dataLogDir=/var/lib/zookeeper-log\n"
      "clientPort=2181\n"
      "initLimit=5\n"
      "syncLimit=2\n"
      "server.1=zoo1:2888:3888;2181\n"
      "server.2=zoo2:2888:3888;2181\n"
      "server.3=zoo3:2888:3888:observer;2181\n"
      "peerType=participant\n"
      "standaloneEnabled=false\n"
      "reconfigEnabled=true\n"
      "admin.enableServer=false\n"
      "4lw.commands.whitelist=stat, ruok, conf, isro, mntr\n"
      "autopurge.snapRetainCount=5\n"
      "autopurge.purgeInterval=24\n"
      "metricsProvider.className=org.apache.zookeeper.metrics.prometheus."
      "PrometheusMetricsProviderFactory\n" },
    { "larch-all-keys.cfg",
      "tickTime=500\n"
      "dataDir=/srv/larch/data\n"
      "dataLogDir=/srv/larch/log\n"
      "clientPort=12181\n"
      "clientPortAddress=0.0.0.0\n"
      "minSessionTimeout=1000\n"
      "maxSessionTimeout=60000\n"
      "maxClientCnxns=0\n"
      "4lw.commands.whitelist=*\n"
      "readonlymode.enabled=true\n"
      "zookeeper.snapCount=5000\n"
      "preAllocSize=1024\n"
      "autopurge.snapRetainCount=3\n"
      "autopurge.purgeInterval=1\n"
      "zookeeper.globalOutstandingLimit=500\n"
      "znode.container.checkIntervalMs=1000\n"
      "jute.maxbuffer=4194304\n"
      "zookeeper.extendedTypesEnabled=false\n"
      "DigestAuthenticationProvider.superDigest=super:GcMT0ijsx21yLyTWAWMqFV/azZE=\n"
      "larch.workers=4\n"
      "larch.logLevel=debug\n"
      "larch.inlineSequencer=true\n" },
    { "properties-syntax.cfg",
      "   # indented comment\n"
      "! bang comment\n"
      "tickTime : 3000\n"
      "clientPort 2182\n"
      "dataDir=/data/with\\ space/\\u00e9t\\u00e9\n"
      "4lw.commands.whitelist=srvr,\\\n"
      "    stat,\\\n"
      "    ruok\n"
      "d\\=ir=x\n"
      "larch.logLevel=\\tinfo\n"
      "\n" },
    { "crlf.cfg", "tickTime=2000\r\ndataDir=/tmp/zk\r\nclientPort=2181\r\n\r\n# end\r\n" },
    { "cr-only.cfg", "tickTime=2000\rclientPort=2181\rmaxClientCnxns=10" },
    { "minimal.cfg", "clientPort=2183" },
    { "errors.cfg",
      "clientPort=abc\n"
      "tickTime=-1\n"
      "minSessionTimeout=50000\n"
      "maxSessionTimeout=100\n"
      "jute.maxbuffer=0\n"
      "readonlymode.enabled=yes\n"
      "DigestAuthenticationProvider.superDigest=nocolon\n"
      "larch.logLevel=verbose\n"
      "larch.workers=65\n"
      "4lw.commands.whitelist=ruok,bogus\n"
      "ticktime=2000\n"
      "clientPortAddress=\n"
      "key=\\u12\n"
      "snapCount=99999999999999999999\n" },
    { "derive-overflow.cfg", "tickTime=2147483647\n" },
    { "one-participant.cfg",
      "tickTime=2000\ninitLimit=10\nsyncLimit=5\nstandaloneEnabled=true\n"
      "server.1=[::1]:2888:3888:participant;[::1]:2181\n"
      "server.2=127.0.0.2:2888:3888:observer;127.0.0.2:2181\n"
      "server.3=[[x]:1:2\nserver.1=dup:1:2\ngroup.1=1:2\n" },
    { "continued-blank.cfg", "dataDir=/a\\\n\nclientPort=2181\\" },
};

#endif /* LARCH_FUZZ_GEN_CONFIGS_H */
