package streamlets.kafka.eos;

import java.util.Map;

/**
 * The driver's side of the protocol (pluggable: option "committer" = a class with a public
 * no-argument constructor; default {@link LedgerCommitter}). Called by Spark's driver thread,
 * one micro-batch at a time, commit() before Spark writes the batch's commit log.
 */
public interface EosCommitter {
    /** Once per query start, before any task runs: roll recorded decisions forward, abort leftovers. */
    void open(Map<String, String> options);

    /** The highest batch id whose transactions are committed (-1: none). Tasks of a replayed
     * batch at or under it write nothing: its records are already in Kafka. */
    long lastCommitted();

    /** Before each batch's tasks start: the number of task partitions (bounds the transactional ids). */
    void beforeTasks(int numPartitions);

    /** Record the decision durably, then commit every task's transaction. */
    void commit(long batchId, TxnCommit[] messages);

    /** The batch failed: abort the transactions of the tasks that reported. */
    void abort(long batchId, TxnCommit[] messages);
}
