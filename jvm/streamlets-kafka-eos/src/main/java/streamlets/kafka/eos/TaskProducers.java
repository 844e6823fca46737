package streamlets.kafka.eos;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Each JVM's idle task producers, kept from one micro-batch to the next (Spark's Kafka sink
 * keeps its producers per executor the same way: CachedKafkaProducer). A task's producer is kept
 * with its transaction flushed and open (or empty and ended), tagged with that transaction's token;
 * the next task of the same transactional id continues on it only when the driver says it
 * committed that very transaction, or the empty one's batch ({@link EosCommitter#committed()}): then no new producer, connection or
 * initTransactions is needed (one coordinator round trip and a producer's start per task and
 * batch). Otherwise it is closed without ending its transaction (the new producer's
 * initTransactions fences it and aborts what is open). Idle ones are closed after
 * {@link #IDLE_SECONDS}.
 */
final class TaskProducers {
    /** How long a producer stays idle before it is closed (seconds). */
    static final long IDLE_SECONDS = 60;

    private record Idle(ResumableProducer producer, String token, long since) {
    }

    private static final Map<String, Idle> IDLE = new HashMap<>();
    private static ScheduledExecutorService reaper;

    private TaskProducers() {
    }

    /** The key of a transactional id's producers under one producer configuration. */
    static String key(String transactionalId, Properties config) {
        return transactionalId + "\0" + config.hashCode();
    }

    /** The idle producer of `key` when its last transaction is `committedToken` (the driver
     * committed it, or it was empty and its batch succeeded), else null (an idle one is closed). */
    static synchronized ResumableProducer take(String key, String committedToken) {
        Idle idle = IDLE.remove(key);
        if (idle == null) {
            return null;
        }
        if (idle.token.equals(committedToken)) {
            return idle.producer;
        }
        idle.producer.closeKeepingTransaction();
        return null;
    }

    /** Keep `producer` for the next task of `key`, its last transaction `token` flushed and left
     * open for the driver (or empty, ended already). */
    static synchronized void keep(String key, ResumableProducer producer, String token) {
        Idle old = IDLE.put(key, new Idle(producer, token, System.nanoTime()));
        if (old != null) {
            old.producer.closeKeepingTransaction();
        }
        if (reaper == null) {
            reaper = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "streamlets-kafka-eos idle producers");
                t.setDaemon(true);
                return t;
            });
            reaper.scheduleWithFixedDelay(TaskProducers::evict, IDLE_SECONDS, IDLE_SECONDS / 2, TimeUnit.SECONDS);
        }
    }

    private static synchronized void evict() {
        long now = System.nanoTime();
        for (Iterator<Idle> it = IDLE.values().iterator(); it.hasNext(); ) {
            Idle idle = it.next();
            if (now - idle.since > TimeUnit.SECONDS.toNanos(IDLE_SECONDS)) {
                it.remove();
                idle.producer.closeKeepingTransaction();
            }
        }
    }
}
