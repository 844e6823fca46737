package streamlets.kafka.eos;

import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A transactional KafkaProducer that can report its (producerId, epoch) and resume a transaction
 * begun by another producer instance (another process) with the same transactional.id, to commit
 * or abort it. Ported from Flink's FlinkKafkaInternalProducer.resumeTransaction
 * (apache/flink-connector-kafka, sink/internal/FlinkKafkaInternalProducer.java).
 *
 * <p>Reflection on kafka-clients internals (verified against kafka-clients 3.9.2, Spark 4.2.0's
 * connector dependency): KafkaProducer.transactionManager; TransactionManager.producerIdAndEpoch
 * (org.apache.kafka.common.utils.ProducerIdAndEpoch, constructor (long, short)),
 * .txnPartitionMap (TxnPartitionMap.reset()), .transactionStarted, private
 * transitionTo(TransactionManager$State); states UNINITIALIZED -> INITIALIZING -> READY ->
 * IN_TRANSACTION; private completeTransaction() (continueAfterCommit); maybeAddPartition(TopicPartition) and
 * KafkaProducer.sender's wakeup() (addPartitionNow, which does nothing where they are missing). A version without them fails with IllegalStateException("Incompatible
 * kafka-clients ...") at the first call, never silently.
 *
 * <p>Close with {@link #closeKeepingTransaction()}: a graceful close() aborts an open
 * transaction (the Sender's shutdown aborts incomplete transactions); close(Duration.ZERO) does
 * not.
 */
public class ResumableProducer extends KafkaProducer<byte[], byte[]> {
    private static final String STATE_ENUM =
            "org.apache.kafka.clients.producer.internals.TransactionManager$State";

    public ResumableProducer(Properties base, String transactionalId) {
        super(withId(base, transactionalId));
    }

    static Properties withId(Properties base, String transactionalId) {
        Properties p = new Properties();
        p.putAll(base);
        p.setProperty(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.setProperty(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.setProperty(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.putIfAbsent(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.putIfAbsent(ProducerConfig.ACKS_CONFIG, "all");
        return p;
    }

    /** The producer id the coordinator gave this producer (after initTransactions). */
    public long producerId() {
        return (long) get(get(transactionManager(), "producerIdAndEpoch"), "producerId");
    }

    /** The epoch the coordinator gave this producer (after initTransactions). */
    public short epoch() {
        return (short) get(get(transactionManager(), "producerIdAndEpoch"), "epoch");
    }

    /**
     * Take over the open transaction of (producerId, epoch) on this producer's transactional.id,
     * instead of initTransactions (which would fence it and abort it). Then commitTransaction()
     * or abortTransaction() ends it. Call on a fresh producer only.
     */
    public void resumeTransaction(long producerId, short epoch) {
        if (producerId < 0 || epoch < 0) {
            throw new IllegalArgumentException("bad producerId " + producerId + " / epoch " + epoch);
        }
        Object tm = transactionManager();
        synchronized (tm) {
            if ("READY".equals(state(tm))) {
                transition(tm, "UNINITIALIZED"); // a committing producer kept from an earlier commit
            }
            transition(tm, "INITIALIZING");
            invoke(get(tm, "txnPartitionMap"), "reset", new Class<?>[0]);
            set(tm, "producerIdAndEpoch", newProducerIdAndEpoch(tm, producerId, epoch));
            transition(tm, "READY");
            transition(tm, "IN_TRANSACTION");
            // EndTxn is only sent when the transaction has started (a record was sent); the
            // resumed transaction has records, so say so.
            set(tm, "transactionStarted", true);
        }
    }

    /**
     * This producer's open transaction was committed by another instance (the driver resumed it):
     * end it locally, as its own commit would (TransactionManager.completeTransaction: READY, the
     * partitions' sequence numbers kept, as the broker keeps them under the same producer id and
     * epoch), so that it can begin the next one. Nothing to do without an open transaction.
     */
    public void continueAfterCommit() {
        Object tm = transactionManager();
        synchronized (tm) {
            String state = state(tm);
            if ("READY".equals(state)) {
                return;
            }
            if (!"IN_TRANSACTION".equals(state)) {
                throw new IllegalStateException("cannot continue a producer in state " + state);
            }
            transition(tm, "COMMITTING_TRANSACTION");
            invoke(tm, "completeTransaction", new Class<?>[0]);
        }
    }

    /**
     * Add {@code partition} to the open transaction now, as a first send to it would (the Sender
     * sends AddPartitionsToTxn at once: TransactionManager.maybeAddPartition, Sender.wakeup), so that
     * a later send to it goes without that round trip. Only the transaction coordinator learns of
     * it: the partition's leader holds its last stable offset back only once a record of the
     * transaction arrives. Returns false, having changed nothing, where these internals differ (the
     * send adds the partition as usual then).
     */
    public boolean addPartitionNow(TopicPartition partition) {
        Object tm = transactionManager();
        Method add;
        try {
            add = tm.getClass().getDeclaredMethod("maybeAddPartition", TopicPartition.class);
            add.setAccessible(true);
        } catch (NoSuchMethodException e) {
            return false;
        }
        try {
            add.invoke(tm, partition);
        } catch (java.lang.reflect.InvocationTargetException e) { // the producer's own error (fenced...), as a send throws it
            throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
        } catch (IllegalAccessException e) {
            throw incompatible(e);
        }
        invoke(get(this, KafkaProducer.class, "sender"), "wakeup", new Class<?>[0]);
        return true;
    }

    /** Close without ending an open transaction (the executors' side after flush). */
    public void closeKeepingTransaction() {
        close(Duration.ZERO);
    }

    /** The TransactionManager's state's name (UNINITIALIZED, READY, IN_TRANSACTION, ...). */
    private static String state(Object tm) {
        return String.valueOf(get(tm, "currentState"));
    }

    private Object transactionManager() {
        return get(this, KafkaProducer.class, "transactionManager");
    }

    private static Object newProducerIdAndEpoch(Object tm, long producerId, short epoch) {
        try {
            Field f = tm.getClass().getDeclaredField("producerIdAndEpoch");
            Constructor<?> c = f.getType().getDeclaredConstructor(Long.TYPE, Short.TYPE);
            c.setAccessible(true);
            return c.newInstance(producerId, epoch);
        } catch (ReflectiveOperationException e) {
            throw incompatible(e);
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void transition(Object tm, String state) {
        try {
            Class<Enum> states = (Class<Enum>) Class.forName(STATE_ENUM);
            invoke(tm, "transitionTo", new Class<?>[] {states}, Enum.valueOf(states, state));
        } catch (ClassNotFoundException e) {
            throw incompatible(e);
        }
    }

    private static Object invoke(Object target, String name, Class<?>[] types, Object... args) {
        try {
            Method m = target.getClass().getDeclaredMethod(name, types);
            m.setAccessible(true);
            return m.invoke(target, args);
        } catch (java.lang.reflect.InvocationTargetException e) {
            throw new IllegalStateException(name + " failed", e.getCause());
        } catch (ReflectiveOperationException e) {
            throw incompatible(e);
        }
    }

    private static Object get(Object target, String name) {
        return get(target, target.getClass(), name);
    }

    private static Object get(Object target, Class<?> cls, String name) {
        try {
            Field f = cls.getDeclaredField(name);
            f.setAccessible(true);
            return f.get(target);
        } catch (ReflectiveOperationException e) {
            throw incompatible(e);
        }
    }

    private static void set(Object target, String name, Object value) {
        try {
            Field f = target.getClass().getDeclaredField(name);
            f.setAccessible(true);
            f.set(target, value);
        } catch (ReflectiveOperationException e) {
            throw incompatible(e);
        }
    }

    private static IllegalStateException incompatible(Exception e) {
        return new IllegalStateException("Incompatible kafka-clients version for resumeTransaction", e);
    }
}
