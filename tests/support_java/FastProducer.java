// Produces records at full speed with the Java kafka-clients producer (not aiokafka), for the unpaced
// congruence tests. Input on stdin, one record a line: TOPIC \t KEY (base64, "-" = none) \t VALUE (base64).
// Sends every record without waiting for the previous one (acks=all, idempotent, in order per partition),
// then prints "partition offset timestamp_ms" per record in input order. With a second argument
// "distinct-ms" each record is sent once the previous one is acknowledged and the clock has moved past
// its stamp: still no wait for the pipeline, but a total order of stamps across partitions (the broker's
// LogAppendTime has millisecond resolution; records of one millisecond on different partitions have no
// order, on Kafka or anywhere). A line "FLUSH" flushes, prints what was sent so far and "FLUSHED".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class FastProducer {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("linger.ms", "0");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        Base64.Decoder b64 = Base64.getDecoder();
        boolean distinct = args.length > 1 && args[1].equals("distinct-ms");
        long last = 0;
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            int printed = 0;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) continue;
                if (line.equals("FLUSH")) {  // report what was sent so far, then go on reading
                    producer.flush();
                    for (; printed < sent.size(); printed++) {
                        RecordMetadata md = sent.get(printed).get();
                        System.out.println(md.partition() + " " + md.offset() + " " + md.timestamp());
                    }
                    System.out.println("FLUSHED");
                    System.out.flush();
                    continue;
                }
                String[] f = line.split("\t", -1);
                byte[] key = f[1].equals("-") ? null : b64.decode(f[1]);
                while (distinct && System.currentTimeMillis() <= last) Thread.sleep(0, 200_000);
                Future<RecordMetadata> fut = producer.send(new ProducerRecord<>(f[0], key, b64.decode(f[2])));
                if (distinct) last = fut.get().timestamp();
                sent.add(fut);
            }
            producer.flush();
            for (; printed < sent.size(); printed++) {
                RecordMetadata md = sent.get(printed).get();
                System.out.println(md.partition() + " " + md.offset() + " " + md.timestamp());
            }
        }
    }
}
