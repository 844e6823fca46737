package streamlets.kafka.eos;

import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Command line for tests and operations, one transaction step per process:
 *
 * <pre>
 *   begin BOOTSTRAP TOPIC TXID N    write N records (values "TXID-i", partition i % partitions),
 *                                   flush, print "producerId epoch", exit leaving it open
 *   commit BOOTSTRAP TXID PID EPOCH resume the open transaction and commit it
 *   abort BOOTSTRAP TXID PID EPOCH  resume the open transaction and abort it
 *   fence BOOTSTRAP TXID            initTransactions on TXID: fences its producers, aborts
 *                                   its open transaction
 * </pre>
 * Trailing KEY=VALUE arguments are producer settings (e.g. transaction.timeout.ms=5000).
 */
public final class Tool {
    public static void main(String[] args) {
        Properties base = new Properties();
        base.setProperty("bootstrap.servers", args[1]);
        for (String arg : args) { // trailing producer settings: key=value
            if (arg.contains("=")) {
                base.setProperty(arg.substring(0, arg.indexOf('=')), arg.substring(arg.indexOf('=') + 1));
            }
        }
        String cmd = args[0];
        if (cmd.equals("begin")) {
            String topic = args[2];
            String txid = args[3];
            int n = Integer.parseInt(args[4]);
            ResumableProducer p = new ResumableProducer(base, txid);
            p.initTransactions();
            p.beginTransaction();
            int partitions = p.partitionsFor(topic).size();
            TreeMap<Integer, Integer> counts = new TreeMap<>();
            for (int i = 0; i < n; i++) {
                byte[] value = (txid + "-" + i).getBytes(StandardCharsets.UTF_8);
                p.send(new ProducerRecord<>(topic, i % partitions, null, value));
                counts.merge(i % partitions, 1, Integer::sum);
            }
            p.flush();
            System.out.println(p.producerId() + " " + p.epoch() + " " + counts);
            System.out.flush();
            p.closeKeepingTransaction();
            Runtime.getRuntime().halt(0); // no shutdown hooks, like a crash after flush
        }
        String txid = args[2];
        ResumableProducer p = new ResumableProducer(base, txid);
        if (cmd.equals("fence")) {
            p.initTransactions();
        } else {
            p.resumeTransaction(Long.parseLong(args[3]), Short.parseShort(args[4]));
            if (cmd.equals("commit")) {
                p.commitTransaction();
            } else if (cmd.equals("abort")) {
                p.abortTransaction();
            } else {
                throw new IllegalArgumentException("unknown command " + cmd);
            }
        }
        p.close();
        System.out.println("ok");
    }
}
