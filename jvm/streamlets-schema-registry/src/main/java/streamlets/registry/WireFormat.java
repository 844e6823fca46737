package streamlets.registry;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.avro.Schema;
import org.apache.avro.SchemaCompatibility;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;

/**
 * Confluent Schema Registry's wire format (a zero magic byte, the schema id as a 4-byte big-endian
 * int, then the Avro binary encoding with that schema) read as one inlet's schema: {@link #toReader}
 * gives the value's Avro binary encoding in the inlet's (reader's) schema, which Spark's from_avro
 * then decodes; {@link #problem} says why a value has none (the dead-letter reason).
 *
 * <p>A writer schema equal to the reader's is a copy of the payload; any other is resolved by Avro's
 * schema resolution (GenericDatumReader with writer and reader) and written again with the reader's.
 */
public final class WireFormat implements Serializable {
  private static final long serialVersionUID = 1L;
  public static final byte MAGIC = 0;
  public static final int HEADER = 5;

  private final RegistryClient registry;
  private final String readerJson;
  private transient Schema reader;
  private transient ConcurrentHashMap<Integer, Resolver> resolvers;

  public WireFormat(RegistryClient registry, String readerJson) {
    this.registry = registry;
    this.readerJson = readerJson;
  }

  /** The schema id of a wire-format value, or -1 if it has no header (null, short, no magic byte). */
  public static int schemaId(byte[] value) {
    if (value == null || value.length < HEADER || value[0] != MAGIC) return -1;
    return ((value[1] & 0xff) << 24) | ((value[2] & 0xff) << 16) | ((value[3] & 0xff) << 8) | (value[4] & 0xff);
  }

  /** The value in the reader's Avro binary encoding; null if it is not one (see problem). */
  public byte[] toReader(byte[] value) throws IOException {
    int id = schemaId(value);
    if (id < 0) return null;
    Resolver resolver = resolver(id);
    if (resolver.failure != null) return null;
    try {
      return resolver.resolve(value);
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /** Why toReader gives null for `value`, or null if it does not. */
  public String problem(byte[] value) throws IOException {
    if (value == null) return "null value (tombstone): a record was expected";
    if (value.length == 0 || value[0] != MAGIC) {
      return String.format("not in the schema registry's wire format: the first byte is 0x%02x, not the magic byte 0x00",
          value.length == 0 ? 0 : value[0] & 0xff)
          + (value.length == 0 ? " (empty value)" : "");
    }
    if (value.length < HEADER) return "not in the schema registry's wire format: " + value.length + " bytes, shorter than its 5-byte header";
    int id = schemaId(value);
    Resolver resolver = resolver(id);
    if (resolver.failure != null) return resolver.failure;
    try {
      resolver.resolve(value);
      return null;
    } catch (IOException | RuntimeException e) {
      String why = e instanceof java.io.EOFException ? "the value ends before the record does"
          : e.getClass().getSimpleName() + ": " + e.getMessage();
      return "not a valid Avro encoding of schema id " + id + " (" + resolver.writer.getFullName() + "): " + why;
    }
  }

  private Resolver resolver(int id) throws IOException {
    if (resolvers == null) {
      synchronized (this) {
        if (resolvers == null) {
          reader = new Schema.Parser().parse(readerJson);
          resolvers = new ConcurrentHashMap<>();
        }
      }
    }
    Resolver known = resolvers.get(id);
    if (known != null) return known;
    Schema writer = registry.writer(id);
    Resolver made;
    if (writer == null) {
      made = Resolver.failed(null, "schema id " + id + " is unknown to the schema registry " + registry.url());
      return made;  // not cached here: the client retries unknown ids after a while
    }
    SchemaCompatibility.SchemaPairCompatibility pair = SchemaCompatibility.checkReaderWriterCompatibility(reader, writer);
    if (pair.getType() != SchemaCompatibility.SchemaCompatibilityType.COMPATIBLE) {
      made = Resolver.failed(writer, "schema id " + id + " (" + writer.getFullName() + ") cannot be read as the inlet's "
          + reader.getFullName() + ": " + pair.getResult().getIncompatibilities().stream()
              .map(i -> i.getType() + " at " + i.getLocation() + (i.getMessage() == null ? "" : " (" + i.getMessage() + ")"))
              .reduce((a, b) -> a + "; " + b).orElse(pair.getDescription()));
    } else {
      made = new Resolver(writer, reader);
    }
    resolvers.put(id, made);
    return made;
  }

  /** How values of one writer schema become the reader's encoding. */
  static final class Resolver {
    final Schema writer;
    final String failure;
    final boolean same;
    final GenericDatumReader<Object> datumReader;
    final GenericDatumWriter<Object> datumWriter;

    Resolver(Schema writer, Schema reader) {
      this.writer = writer;
      this.failure = null;
      this.same = writer.equals(reader);
      this.datumReader = same ? null : new GenericDatumReader<>(writer, reader);
      this.datumWriter = same ? null : new GenericDatumWriter<>(reader);
    }

    private Resolver(Schema writer, String failure) {
      this.writer = writer;
      this.failure = failure;
      this.same = false;
      this.datumReader = null;
      this.datumWriter = null;
    }

    static Resolver failed(Schema writer, String failure) {
      return new Resolver(writer, failure);
    }

    byte[] resolve(byte[] value) throws IOException {
      if (same) return Arrays.copyOfRange(value, HEADER, value.length);
      BinaryDecoder decoder = DecoderFactory.get().binaryDecoder(value, HEADER, value.length - HEADER, null);
      Object record;
      synchronized (datumReader) {
        record = datumReader.read(null, decoder);
      }
      if (!decoder.isEnd()) throw new IOException("bytes left after a complete record");
      ByteArrayOutputStream out = new ByteArrayOutputStream(value.length);
      BinaryEncoder encoder = EncoderFactory.get().directBinaryEncoder(out, null);
      synchronized (datumWriter) {
        datumWriter.write(record, encoder);
      }
      encoder.flush();
      return out.toByteArray();
    }
  }
}
