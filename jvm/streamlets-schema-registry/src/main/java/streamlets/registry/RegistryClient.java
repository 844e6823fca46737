package streamlets.registry;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.Serializable;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.Base64;
import java.util.concurrent.ConcurrentHashMap;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.apache.avro.Schema;

/**
 * A Confluent Schema Registry REST client of one registry, for the executors: the writer schema of
 * a schema id ({@code GET /schemas/ids/<id>}), cached in the JVM for its lifetime (an id names one
 * schema forever). It holds where the secrets are (a file or an environment variable), never a
 * secret: it is serialized into Spark's plan and shipped to executors, which read the secrets.
 *
 * <p>An id the registry answers 404 for is unknown: {@link #writer} returns null, remembered for
 * {@link #UNKNOWN_RETRY_MILLIS} so a burst of such records does not query it once each. Any other
 * failure (the registry unreachable, 401, 5xx) is an IOException: the task fails and Spark retries
 * it, as for a broker that is down; records are never dead-lettered for the registry's outage.
 */
public final class RegistryClient implements Serializable {
  private static final long serialVersionUID = 1L;
  static final long UNKNOWN_RETRY_MILLIS = 30_000L;
  private static final ConcurrentHashMap<String, Schema> SCHEMAS = new ConcurrentHashMap<>();
  private static final ConcurrentHashMap<String, Long> UNKNOWN = new ConcurrentHashMap<>();
  private static final ObjectMapper JSON = new ObjectMapper();

  private final String url;
  private final String caFile;
  private final String username;
  private final String passwordFile;
  private final String passwordEnv;
  private transient HttpClient http;
  private transient String authorization;

  /** Arguments may be null or empty: no CA (the JVM's trust store), no basic auth. */
  public RegistryClient(String url, String caFile, String username, String passwordFile, String passwordEnv) {
    this.url = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
    this.caFile = blankToNull(caFile);
    this.username = blankToNull(username);
    this.passwordFile = blankToNull(passwordFile);
    this.passwordEnv = blankToNull(passwordEnv);
  }

  private static String blankToNull(String s) {
    return s == null || s.isEmpty() ? null : s;
  }

  public String url() {
    return url;
  }

  /** The schema registered under {@code id}; null if the registry does not know the id. */
  public Schema writer(int id) throws IOException {
    String key = url + "#" + id;
    Schema known = SCHEMAS.get(key);
    if (known != null) return known;
    Long until = UNKNOWN.get(key);
    if (until != null && until > System.currentTimeMillis()) return null;
    HttpResponse<String> response = get("/schemas/ids/" + id);
    if (response.statusCode() == 404) {
      UNKNOWN.put(key, System.currentTimeMillis() + UNKNOWN_RETRY_MILLIS);
      return null;
    }
    if (response.statusCode() != 200) {
      String body = response.body() == null ? "" : response.body();
      throw new IOException("schema registry " + url + " answered " + response.statusCode() + " for schema id " + id
          + ": " + body.substring(0, Math.min(body.length(), 300)));
    }
    JsonNode node = JSON.readTree(response.body());
    JsonNode type = node.get("schemaType");
    if (type != null && !"AVRO".equals(type.asText())) {
      throw new IOException("schema id " + id + " of registry " + url + " is a " + type.asText() + " schema, not Avro");
    }
    JsonNode references = node.get("references");
    if (references != null && references.size() > 0) {
      throw new IOException("schema id " + id + " of registry " + url + " refers to other subjects' schemas "
          + "(schema references), which streamlets do not resolve");
    }
    Schema schema;
    try {
      schema = new Schema.Parser().parse(node.get("schema").asText());
    } catch (RuntimeException e) {
      throw new IOException("schema id " + id + " of registry " + url + " is no Avro schema Avro parses: " + e.getMessage(), e);
    }
    SCHEMAS.put(key, schema);
    return schema;
  }

  private HttpResponse<String> get(String path) throws IOException {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url + path))
        .timeout(Duration.ofSeconds(30))
        .header("Accept", "application/vnd.schemaregistry.v1+json, application/json");
    String auth = authorization();
    if (auth != null) request.header("Authorization", auth);
    try {
      return client().send(request.GET().build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while asking schema registry " + url, e);
    }
  }

  private synchronized String authorization() throws IOException {
    if (username == null) return null;
    if (authorization == null) {
      String password;
      if (passwordFile != null) {
        password = Files.readString(Path.of(passwordFile), StandardCharsets.UTF_8);
        if (password.endsWith("\n")) password = password.substring(0, password.length() - 1);
      } else if (passwordEnv != null) {
        password = System.getenv(passwordEnv);
        if (password == null) throw new IOException("schema registry password: environment variable " + passwordEnv + " is not set");
      } else {
        password = "";
      }
      String pair = username + ":" + password;
      authorization = "Basic " + Base64.getEncoder().encodeToString(pair.getBytes(StandardCharsets.UTF_8));
    }
    return authorization;
  }

  private synchronized HttpClient client() throws IOException {
    if (http == null) {
      HttpClient.Builder builder = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10));
      if (caFile != null) builder.sslContext(trusting(caFile));
      http = builder.build();
    }
    return http;
  }

  /** An SSLContext trusting the PEM certificates of {@code caFile} only. */
  static SSLContext trusting(String caFile) throws IOException {
    try (InputStream in = Files.newInputStream(Path.of(caFile))) {
      KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
      store.load(null, null);
      int n = 0;
      for (Certificate cert : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
        store.setCertificateEntry("ca-" + n++, cert);
      }
      if (n == 0) throw new IOException("no PEM certificate in " + caFile);
      TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      tmf.init(store);
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(null, tmf.getTrustManagers(), null);
      return context;
    } catch (IOException e) {
      throw e;
    } catch (Exception e) {
      throw new IOException("cannot trust the CA certificates of " + caFile + ": " + e, e);
    }
  }
}
